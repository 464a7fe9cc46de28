import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource } from '#api';
import { loadSample } from '../../../../../test/support/samples.ts';
import { planWake, withWokenReplicas } from './plan.ts';

const spec = { replicas: 0, wakeOnDemand: true, wake: { replicas: 2, idleSeconds: 600, holdSeconds: 300 } };
const at = (s: number) => new Date(s * 1000).toISOString();

describe('planWake', () => {
  it('leaves Deployments that do not wake on demand, or run replicas, as their spec says', () => {
    expect(
      planWake({
        spec: { replicas: 3, wakeOnDemand: true },
        status: undefined,
        demandMs: 5,
        nowMs: 10,
        watching: true,
      }),
    ).toEqual({
      replicas: undefined,
      status: undefined,
      recheckAfterMs: undefined,
    });
    expect(
      planWake({ spec: { replicas: 0 }, status: undefined, demandMs: 5, nowMs: 10, watching: true }).replicas,
    ).toBeUndefined();
  });

  it('sleeps at 0 until wanted, then runs wake.replicas until idle for wake.idleSeconds', () => {
    expect(
      planWake({ spec, status: undefined, demandMs: undefined, nowMs: 1_000_000, watching: true }),
    ).toEqual({
      replicas: 0,
      status: { awake: false },
      recheckAfterMs: undefined,
    });
    const woken = planWake({
      spec,
      status: { awake: false },
      demandMs: 1_000_000,
      nowMs: 1_000_500,
      watching: true,
    });
    expect(woken).toEqual({
      replicas: 2,
      status: { awake: true, demandAt: at(1000) },
      recheckAfterMs: 599_500,
    });
    // 601 s later with no more demand: asleep again.
    const slept = planWake({
      spec,
      status: woken.status,
      demandMs: 1_000_000,
      nowMs: 1_601_000,
      watching: true,
    });
    expect(slept).toMatchObject({ replicas: 0, status: { awake: false }, recheckAfterMs: undefined });
  });

  it('says nothing can wake it when the operator does not read the gateway tier', () => {
    const plan = planWake({
      spec,
      status: undefined,
      demandMs: 1_000_000,
      nowMs: 1_000_500,
      watching: false,
    });
    expect(plan.replicas).toBe(0);
    expect(plan.status?.message).toContain('--gateway-admin-url');
  });

  it('remembers demand across a restart from status, and rewrites it only when it moved a quarter of the idle time', () => {
    const status = { awake: true, demandAt: at(1000) };
    // A new operator with no memory: still awake on what status says.
    expect(planWake({ spec, status, demandMs: undefined, nowMs: 1_300_000, watching: true })).toMatchObject({
      replicas: 2,
      status,
    });
    // Demand 100 s later: status unchanged (under 150 s); 200 s later: rewritten.
    expect(planWake({ spec, status, demandMs: 1_100_000, nowMs: 1_100_000, watching: true }).status).toEqual(
      status,
    );
    expect(planWake({ spec, status, demandMs: 1_200_000, nowMs: 1_200_000, watching: true }).status).toEqual({
      awake: true,
      demandAt: at(1200),
    });
  });
});

describe('a prefill/decode pair waking from zero', () => {
  const sleepy = ((): DeploymentResource => {
    const doc = loadSample('deployment-pd-hisparse.yaml');
    const d = doc.spec['disaggregation'] as Record<string, { replicas: number }>;
    d['prefill']!.replicas = 0;
    d['decode']!.replicas = 0;
    doc.spec['wakeOnDemand'] = true;
    doc.spec['wake'] = { replicas: 2, idleSeconds: 600, holdSeconds: 300 };
    const r = validateResource(doc);
    if (!r.ok || r.value.kind !== 'Deployment') throw new Error(JSON.stringify(r));
    return r.value;
  })();
  /** With its parts at these replicas (declared, or as rendered from the DeploymentParts). */
  const root = (prefill: number, decode: number): DeploymentResource => {
    const d = sleepy.spec.disaggregation!;
    const disaggregation = {
      ...d,
      prefill: { ...d.prefill, replicas: prefill },
      decode: { ...d.decode, replicas: decode },
    };
    return { ...sleepy, spec: { ...sleepy.spec, disaggregation } };
  };
  const pairSpec = (prefill: number, decode: number) => root(prefill, decode).spec;
  const running = (d: DeploymentResource) => [
    d.spec.disaggregation?.prefill.replicas,
    d.spec.disaggregation?.decode.replicas,
  ];

  it('wakes both parts together on demand, and puts both to sleep after the idle time', () => {
    const asleep = planWake({
      spec: pairSpec(0, 0),
      status: undefined,
      demandMs: undefined,
      nowMs: 1_000_000,
      watching: true,
    });
    expect(asleep).toEqual({ replicas: 0, status: { awake: false }, recheckAfterMs: undefined });
    expect(running(withWokenReplicas(root(0, 0), asleep))).toEqual([0, 0]);

    const woken = planWake({
      spec: pairSpec(0, 0),
      status: asleep.status,
      demandMs: 1_000_000,
      nowMs: 1_000_500,
      watching: true,
    });
    expect(woken).toEqual({
      replicas: 2,
      status: { awake: true, demandAt: at(1000) },
      recheckAfterMs: 599_500,
    });
    expect(running(withWokenReplicas(root(0, 0), woken))).toEqual([2, 2]);

    const slept = planWake({
      spec: pairSpec(0, 0),
      status: woken.status,
      demandMs: 1_000_000,
      nowMs: 1_601_000,
      watching: true,
    });
    expect(slept).toMatchObject({ replicas: 0, status: { awake: false } });
    expect(running(withWokenReplicas(root(0, 0), slept))).toEqual([0, 0]);
  });

  it('leaves a part its DeploymentPart scaled above wake.replicas at its own replicas', () => {
    const woken = planWake({
      spec: pairSpec(0, 0),
      status: undefined,
      demandMs: 1_000_000,
      nowMs: 1_000_500,
      watching: true,
    });
    // Rendered with the parts' replicas first (parts.ts): prefill was scaled to 3 on its part.
    expect(running(withWokenReplicas(root(3, 0), woken))).toEqual([3, 2]);
  });

  it('does not follow demand with only one part at 0: that pair is not asleep', () => {
    // The API refuses 0 and 1 with wakeOnDemand (rules); the planner does not rely on it.
    for (const [prefill, decode] of [
      [0, 1],
      [1, 0],
      [1, 1],
    ] as const) {
      const plan = planWake({
        spec: pairSpec(prefill, decode),
        status: undefined,
        demandMs: 1_000_000,
        nowMs: 1_000_500,
        watching: true,
      });
      expect(plan).toEqual({ replicas: undefined, status: undefined, recheckAfterMs: undefined });
      expect(running(withWokenReplicas(root(prefill, decode), plan))).toEqual([prefill, decode]);
    }
  });
});
