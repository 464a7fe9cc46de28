// A runtime that says it drains (SGLang after SIGTERM: /ready 503, generation
// still served) leaves every pick of this replica at its next /ready poll,
// before the routing table learns anything; simulators in-process, over real HTTP.

import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { startSim, type RunningSim } from '../../test/support/sim/testing.ts';
import { build } from './app.ts';
import { ManualClock } from '../../test/support/manual-clock.ts';
import { StaticRoutingTable } from './routing/table.ts';
import { eventually } from '../../test/support/gateway/fake-upstream.ts';
import { buildTestEndpoint, buildTestRoute } from '../../test/support/gateway/routes.ts';

let sims: RunningSim[] = [];
let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
  await Promise.all(sims.map((s) => s.close()));
  sims = [];
});

async function setup(n: number): Promise<{ app: FastifyInstance; clock: ManualClock }> {
  sims = await Promise.all(Array.from({ length: n }, () => startSim(['--model-path', 'm'])));
  const table = new StaticRoutingTable([
    buildTestRoute(
      sims.map((s, i) => buildTestEndpoint(`sim${i}`, s.url)),
      { policy: 'round-robin', reuse: false },
    ),
  ]);
  const clock = new ManualClock();
  app = build({ table, clock, readyPollIntervalMs: 1000 });
  return { app, clock };
}

async function servedBy(a: FastifyInstance, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await a.inject({
      method: 'POST',
      url: '/v1/completions',
      payload: { model: 'm', prompt: `question ${i}`, max_tokens: 2 },
    });
    expect(r.statusCode).toBe(200);
    out.push(String(r.headers['x-cacheroute-endpoint']));
  }
  return out;
}

async function downOnStatus(a: FastifyInstance): Promise<Record<string, string | null>> {
  const view = (await a.inject({ url: '/status.json' })).json<{
    deployments: { endpoints: { id: string; down: string | null }[] }[];
  }>();
  return Object.fromEntries(view.deployments.flatMap((d) => d.endpoints.map((e) => [e.id, e.down])));
}

describe('a runtime that drains', () => {
  it('leaves every pick at the next /ready poll and shows as draining on /status', async () => {
    const { app, clock } = await setup(3);
    expect(new Set(await servedBy(app, 6))).toEqual(new Set(['sim0', 'sim1', 'sim2']));
    void sims[0]?.server.terminate();
    clock.advance(1000);
    await eventually(() => app.gateway.standing.list().length > 0);
    expect(app.gateway.standing.list()).toEqual([{ id: 'sim0', reason: 'draining' }]);
    expect(await servedBy(app, 6)).not.toContain('sim0');
    expect(await downOnStatus(app)).toEqual({ sim0: 'draining', sim1: null, sim2: null });
  });

  it('when every endpoint drains, they still serve (a draining SGLang does) rather than a 503', async () => {
    const { app, clock } = await setup(2);
    for (const s of sims) void s.server.terminate();
    clock.advance(1000);
    await eventually(() => app.gateway.standing.list().length === 2);
    expect(new Set(await servedBy(app, 4))).toEqual(new Set(['sim0', 'sim1']));
  });
});
