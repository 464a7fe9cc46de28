// GIE's conformance checks (conformance/ v1.6.0, its tests/*.go) reproduced
// against a real Envoy 1.40, cacheroute's endpoint picker with GIE's test hooks
// on (--picker-conformance-hooks, epp/conformance-hooks.ts) and simulators as
// the pool's pods: each `it` carries the suite's test name. The suite's pods
// have an IP each: here each "pod" is a loopback address of its own
// (127.0.0.2, .3, ...), with one simulator per port (a data-parallel pod has
// several); which pod served a request is the simulator's own word (its
// x-sim-worker header, host:port), as the suite's echo server names its pod.
// The checks that test a gateway controller's status conditions are the
// integration tier's (test/integration/operator/inference-pool-gie-checks.test.ts);
// docs/picker.md has the table. Every port bound on 0 and read back.

import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import {
  startEnvoy,
  untilPickerMarkedDown,
  type EnvoyRoute,
  type RunningEnvoy,
} from '../../test/support/envoy.ts';
import { buildTestEndpoint, buildTestRoute } from '../../test/support/gateway/routes.ts';
import { startSim, type RunningSim } from '../../test/support/sim/testing.ts';
import { build } from './app.ts';
import { SERVED_RESULT_HEADER, TEST_SELECTION_HEADER } from './epp/conformance-hooks.ts';
import type { PickerServer } from './epp/server.ts';
import { StaticRoutingTable } from './routing/table.ts';
import { startEndpointPicker } from './server.ts';
import { OPEN_DIRECTORY } from './tenancy/tenant.ts';

interface Pod {
  readonly ip: string;
  /** One simulator per port (a DP rank each). */
  readonly sims: readonly RunningSim[];
  readonly ports: readonly string[];
}

interface Stack {
  readonly app: FastifyInstance;
  epp: PickerServer | undefined;
  readonly envoy: RunningEnvoy;
  readonly pods: readonly Pod[];
}

let stacks: Stack[] = [];
afterEach(async () => {
  for (const s of stacks) {
    await s.envoy.close();
    await s.epp?.close();
    await s.app.close();
    await Promise.all(s.pods.flatMap((p) => p.sims.map((sim) => sim.close())));
  }
  stacks = [];
});

/** `pods` pods of `ranks` simulators each, on 127.0.0.2, .3, ...; Envoy → the picker → them. */
async function setup(opts: {
  readonly pods?: number;
  readonly ranks?: number;
  readonly hooks?: boolean;
  readonly envoy?: Partial<Extract<EnvoyRoute, { kind: 'picker' }>>;
  /** Envoy's destination cluster holds the pool's endpoints (a gateway's view of the pool). */
  readonly pool?: boolean;
  /** The pool's FailOpen as the reference bootstrap does it: the picker health-checked, the pool its fallback. */
  readonly failOpen?: boolean;
}): Promise<Stack> {
  const pods: Pod[] = [];
  for (let p = 0; p < (opts.pods ?? 3); p++) {
    const ip = `127.0.0.${p + 2}`;
    const sims = await Promise.all(
      Array.from({ length: opts.ranks ?? 1 }, () =>
        startSim(['--model-path', 'm', '--enable-metrics', '--host', ip]),
      ),
    );
    pods.push({ ip, sims, ports: sims.map((s) => new URL(s.url).port) });
  }
  const table = new StaticRoutingTable([
    buildTestRoute(
      // A simulator's url says 127.0.0.1 whatever it bound: the endpoint is the pod's address.
      pods.flatMap((pod, p) =>
        pod.ports.map((port, r) => buildTestEndpoint(`pod${p}-rank${r}`, `http://${pod.ip}:${port}`)),
      ),
      // GIE's reference picker picks round-robin among the candidates.
      { policy: 'round-robin' },
    ),
  ]);
  const app = build({ table, tenants: OPEN_DIRECTORY });
  const epp = await startEndpointPicker(
    app,
    { mode: 'picker', port: 0, healthPort: 0, ...(opts.hooks === false ? {} : { conformanceHooks: true }) },
    '127.0.0.1',
    OPEN_DIRECTORY,
    () => true,
  );
  const envoy = await startEnvoy({
    kind: 'picker',
    pickerPort: epp.port,
    ...(opts.pool && !opts.failOpen ? { poolEndpoints: poolOf(pods) } : {}),
    ...(opts.failOpen ? { failOpen: { pool: poolOf(pods), pickerHealthPort: epp.healthPort } } : {}),
    ...opts.envoy,
  });
  const stack: Stack = { app, epp, envoy, pods };
  stacks.push(stack);
  return stack;
}

function poolOf(pods: readonly Pod[]): string[] {
  return pods.flatMap((p) => p.ports.map((port) => `${p.ip}:${port}`));
}

/**
 * The suite's request: a POST of its body with the hook header. Its path is the HTTPRoute's
 * (`/primary-gateway-test`); the picker takes generation paths, so the body goes to
 * `/v1/completions` (it is a completions body), for the route's model.
 */
async function suiteRequest(
  envoy: RunningEnvoy,
  selection?: string,
): Promise<{ status: number; served: string; result: string | null }> {
  const res = await fetch(`${envoy.url}/v1/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(selection !== undefined ? { [TEST_SELECTION_HEADER]: selection } : {}),
    },
    body: JSON.stringify({
      model: 'm',
      prompt: 'Write as if you were a critic: San Francisco',
      max_tokens: 2,
    }),
  });
  await res.text();
  return {
    status: res.status,
    served: res.headers.get('x-sim-worker') ?? '',
    result: res.headers.get(SERVED_RESULT_HEADER),
  };
}

/** `total` requests, `concurrency` at a time (the suite: 100 at 10); the served host:ports. */
async function flood(
  envoy: RunningEnvoy,
  selection: string,
  total = 30,
  concurrency = 10,
): Promise<string[]> {
  const served: string[] = [];
  for (let sent = 0; sent < total; sent += concurrency) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(concurrency, total - sent) }, () => suiteRequest(envoy, selection)),
    );
    for (const r of batch) {
      expect(r.status).toBe(200);
      served.push(r.served);
    }
  }
  return served;
}

const hostOf = (hostPort: string): string => hostPort.split(':')[0] ?? '';
const portOf = (hostPort: string): string => hostPort.split(':')[1] ?? '';

// Each check is a few hundred requests through Envoy: a slower machine's time, never a figure.
describe(
  "GIE's conformance checks, reproduced against Envoy and cacheroute's picker",
  { timeout: 60_000 },
  () => {
    it('GatewayFollowingEPPRouting', async () => {
      const { envoy, pods } = await setup({});
      const ips = pods.map((p) => p.ip);
      // Each pod named alone serves the request.
      for (const ip of ips) {
        const r = await suiteRequest(envoy, ip);
        expect(r.status).toBe(200);
        expect(hostOf(r.served)).toBe(ip);
      }
      for (const named of [[ips[2]], [ips[0], ips[1]], ips] as string[][]) {
        const served = await flood(envoy, named.join(','));
        // Only the named pods, and (round-robin, as the reference picker) each of them.
        expect(new Set(served.map(hostOf)), `named ${named.join(',')}`).toEqual(new Set(named));
      }
    });

    it('GatewayFollowingEPPRoutingWithDataParallelism', async () => {
      const { envoy, pods } = await setup({ ranks: 3 });
      const [a, b, c] = pods as [Pod, Pod, Pod];
      for (const pod of pods) {
        const r = await suiteRequest(envoy, pod.ip);
        expect(r.status).toBe(200);
        expect(hostOf(r.served)).toBe(pod.ip);
      }
      // The suite's three cases: IP → the ports allowed there (empty: any of the pod's ranks).
      const cases: Map<Pod, readonly string[]>[] = [
        new Map([[b, []]]),
        new Map([
          [a, []],
          [c, [c.ports[1] ?? '']],
        ]),
        new Map([
          [a, []],
          [b, [b.ports[0] ?? '', b.ports[2] ?? '']],
          [c, []],
        ]),
      ];
      for (const allowed of cases) {
        const header = [...allowed]
          .flatMap(([pod, ports]) => (ports.length === 0 ? [pod.ip] : ports.map((p) => `${pod.ip}:${p}`)))
          .join(',');
        const served = await flood(envoy, header);
        for (const hostPort of served) {
          const pod = pods.find((p) => p.ip === hostOf(hostPort));
          const ports = pod && allowed.get(pod);
          expect(ports, `${hostPort} for ${header}`).toBeDefined();
          expect(ports?.length ? ports : pod?.ports, `${hostPort} for ${header}`).toContain(portOf(hostPort));
        }
        expect(new Set(served.map(hostOf))).toEqual(new Set([...allowed.keys()].map((p) => p.ip)));
      }
    });

    it('GatewayDestinationEndpointServed', async () => {
      // A conforming data plane reports the served endpoint; the hook hands it to the client.
      const { envoy, pods } = await setup({ envoy: { reportServed: true } });
      for (const pod of pods) {
        const r = await suiteRequest(envoy, pod.ip);
        expect(r.status).toBe(200);
        expect(r.result).toBe(`${pod.ip}:${pod.ports[0]}`);
        expect(r.result).toBe(r.served);
      }
    });

    it('GatewayDestinationEndpointServed: plain Envoy reports no served endpoint, and the hook says so', async () => {
      const { envoy, pods } = await setup({});
      const r = await suiteRequest(envoy, pods[0]?.ip);
      expect(r.status).toBe(200);
      expect(r.result).toMatch(/^fail: missing /);
    });

    // Envoy 1.40's ext_proc fails open for a FULL_DUPLEX_STREAMED body only before the body
    // streams (shared/reference/gie-envoy.md §2): the reference bootstrap's FailOpen health-checks
    // the picker, so Envoy opens no stream to a picker it knows is down (ADR 0037). The suite's
    // POST is then served by a pool pod, as is a request without a body.
    it('EppUnAvailableFailOpen', async () => {
      const stack = await setup({ failOpen: true });
      const { envoy, pods } = stack;
      const ips = pods.map((p) => p.ip);
      // Phase 1: the picker up, the hook's pod serves.
      const target = ips[0] ?? '';
      const before = await suiteRequest(envoy, target);
      expect(before.status).toBe(200);
      expect(hostOf(before.served)).toBe(target);
      // Phase 2: the picker gone; once Envoy's health check sees it down, the pool serves.
      await stack.epp?.close();
      stack.epp = undefined;
      await untilPickerMarkedDown(envoy);
      const after = await suiteRequest(envoy, target);
      expect(after.status).toBe(200);
      expect(ips).toContain(hostOf(after.served));
      const bodiless = await fetch(`${envoy.url}/v1/models`, {
        headers: { [TEST_SELECTION_HEADER]: target },
      });
      expect(bodiless.status).toBe(200);
      expect(ips).toContain(hostOf(bodiless.headers.get('x-sim-worker') ?? ''));
    });

    // The route's half: a pool whose picker cannot be reached (FailClose, the default) answers 5xx
    // and no pod sees the request. (The pool's ResolvedRefs False is the gateway controller's.)
    it('InferencePoolInvalidEPPService', async () => {
      const stack = await setup({ pool: true });
      await stack.epp?.close();
      stack.epp = undefined;
      const r = await suiteRequest(stack.envoy, stack.pods[0]?.ip);
      expect(r.status).toBeGreaterThanOrEqual(500);
      expect(r.served).toBe('');
    });

    it('the hooks are off by default: a client naming an endpoint is not obeyed, and no result header', async () => {
      const { envoy, pods } = await setup({ hooks: false, envoy: { reportServed: true } });
      const served = await flood(envoy, pods[2]?.ip ?? '', 6, 3);
      expect(new Set(served.map(hostOf))).toEqual(new Set(pods.map((p) => p.ip)));
      expect((await suiteRequest(envoy, pods[2]?.ip)).result).toBeNull();
    });
  },
);
