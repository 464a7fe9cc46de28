import { describe, expect, it } from 'vitest';
import { planWake } from './plan.ts';

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
      replicas: 3,
      status: undefined,
      recheckAfterMs: undefined,
    });
    expect(
      planWake({ spec: { replicas: 0 }, status: undefined, demandMs: 5, nowMs: 10, watching: true }).replicas,
    ).toBe(0);
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
