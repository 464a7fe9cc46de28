// Three gateway replicas route as one from the runtimes' own KV events: three
// simulators publish BlockStored/BlockRemoved over ZMQ (as SGLang 0.5.23 does
// with --kv-events-config), every replica subscribes to every publisher, and
// each turn of a conversation reaches the next replica in turn (as a Service
// spreads connections). With the index, a follow-up turn finds the runtime
// that holds its conversation whichever replica it reaches; with each
// replica's own tree (no events), most follow-ups land on a runtime that
// never saw the conversation.

import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import {
  postJson,
  routeEventsOf,
  startSimWithKvEvents,
  type RunningSim,
} from '../../test/support/sim/testing.ts';
import { build } from './app.ts';
import { StaticRoutingTable, type ModelRoute, type RouteEndpoint } from './routing/table.ts';
import { createRng, shuffle } from '../../test/support/gateway/rng.ts';

const PAGE = 16;
const CONVERSATIONS = 9;
const TURNS = 4;
const TURN_TOKENS = 160;

let sims: RunningSim[] = [];
let gateways: FastifyInstance[] = [];

afterEach(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  gateways = [];
  await Promise.all(sims.map((s) => s.close()));
  sims = [];
});

async function startFleet(events: boolean): Promise<RouteEndpoint[]> {
  const endpoints: RouteEndpoint[] = [];
  for (let i = 0; i < 3; i++) {
    const sim = await startSimWithKvEvents([
      '--model-path',
      'm',
      '--page-size',
      String(PAGE),
      '--enable-cache-report',
    ]);
    sims.push(sim);
    endpoints.push({
      id: `sim${i}`,
      url: sim.url,
      role: 'standalone',
      fingerprint: 'fp1',
      verified: true,
      ready: true,
      generation: `g${i}`,
      ...(events ? { events: routeEventsOf(sim, PAGE) } : {}),
    });
  }
  return endpoints;
}

/** The same endpoints, as a table that names no replay endpoint: a subscriber sees only what comes live. */
function withoutReplay(endpoints: readonly RouteEndpoint[]): RouteEndpoint[] {
  return endpoints.map((e) => (e.events ? { ...e, events: { ...e.events, replay: [] } } : e));
}

async function startGateways(endpoints: RouteEndpoint[], replicas: number): Promise<string[]> {
  const route: ModelRoute = {
    model: 'm',
    deployment: 'ns/m',
    fingerprint: 'fp1',
    salt: 'tenant-a',
    routing: RoutingSettings.parse({ policy: 'cache-aware' }),
    admission: Admission.parse({}),
    reuse: ResultReuse.parse({}),
    endpoints,
  };
  const urls: string[] = [];
  for (let r = 0; r < replicas; r++) {
    const app = build({ table: new StaticRoutingTable([route]) });
    gateways.push(app);
    await app.listen({ port: 0, host: '127.0.0.1' });
    urls.push(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
  }
  // Every replica caught up with every publisher before traffic (what /status reports).
  for (let i = 0; i < 500; i++) {
    const ready = gateways.every((g) =>
      endpoints.every((e) => !e.events || g.gateway.kvIndex.usability(e.id).usable),
    );
    if (ready) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return urls;
}

/**
 * Conversations of TURNS turns, each turn's prompt the whole conversation so far: the hit rate of
 * follow-up turns, and the cached tokens the runtimes reported.
 */
interface Conversations {
  readonly history: number[][];
  readonly rng: () => number;
}

function startConversations(): Conversations {
  return { history: Array.from({ length: CONVERSATIONS }, () => [] as number[]), rng: createRng(7) };
}

async function replayConversations(
  gateways: readonly string[],
  conv: Conversations = startConversations(),
  turns: readonly [number, number] = [0, TURNS],
): Promise<{ hitRate: number; cached: number }> {
  let prompt = 0;
  let cached = 0;
  const { history, rng } = conv;
  for (let turn = turns[0]; turn < turns[1]; turn++) {
    // Conversations arrive in a different order each turn (no accidental pattern in the picks).
    const order = shuffle(rng, [...history.keys()]);
    await Promise.all(
      order.map(async (c) => {
        const h = history[c] as number[];
        for (let i = 0; i < TURN_TOKENS; i++) h.push(300 + ((c * 7919 + turn * 131 + i * 17) % 30000));
        // Each turn reaches the next replica: never the one that routed the turn before.
        const gw = gateways[(c + turn) % gateways.length] ?? '';
        const r = await postJson(`${gw}/generate`, {
          model: 'm',
          input_ids: h,
          sampling_params: { max_new_tokens: 1, temperature: 0 },
        });
        expect(r.status).toBe(200);
        const meta = (r.json as { meta_info: { prompt_tokens: number; cached_tokens: number } }).meta_info;
        if (turn > 0) {
          prompt += meta.prompt_tokens;
          cached += meta.cached_tokens;
        }
      }),
    );
    // Between turns a user reads and types; the runtimes' events arrive meanwhile.
    await new Promise((r) => setTimeout(r, 100));
  }
  return { hitRate: cached / prompt, cached };
}

/** Prompt tokens the replicas' routing decisions predicted cached, summed over the tier. */
async function sumPredictedMatches(): Promise<number> {
  let sum = 0;
  for (const g of gateways) {
    const text = (await g.inject({ url: '/metrics' })).body;
    const line = text
      .split('\n')
      .find((l) => l.startsWith('cacheroute_gateway_predicted_matched_tokens_total{'));
    sum += Number(line?.split(' ').pop() ?? 0);
  }
  return sum;
}

describe('gateway replicas routing from KV events', () => {
  it(
    'three replicas keep the hit rate of one; without events they lose most of it',
    { timeout: 60_000 },
    async () => {
      const { hitRate: oneReplica } = await replayConversations(
        await startGateways(await startFleet(true), 1),
      );
      await Promise.all(gateways.map((g) => g.close()));
      await Promise.all(sims.map((s) => s.close()));
      [gateways, sims] = [[], []];

      const withEvents = await replayConversations(await startGateways(await startFleet(true), 3));
      const threeWithEvents = withEvents.hitRate;
      // Decision records predict from the index too: what a replica that never saw a conversation expected.
      const predicted = await sumPredictedMatches();
      expect(predicted).toBeGreaterThan(0.9 * withEvents.cached);
      expect(predicted).toBeLessThan(1.1 * withEvents.cached);
      const [first] = gateways;
      const metrics = (await first?.inject({ url: '/metrics' }))?.body ?? '';
      expect(metrics).toContain('cacheroute_gateway_kv_index_usable{endpoint="sim0"} 1');
      const status = (await first?.inject({ url: '/status.json' }))?.json() as {
        deployments: { endpoints: { id: string; kvIndex: { usable: boolean; blocks: number } | null }[] }[];
      };
      for (const e of status.deployments[0]?.endpoints ?? [])
        expect(e.kvIndex).toMatchObject({ usable: true, blocks: expect.any(Number) });
      await Promise.all(gateways.map((g) => g.close()));
      await Promise.all(sims.map((s) => s.close()));
      [gateways, sims] = [[], []];

      const { hitRate: threeWithoutEvents } = await replayConversations(
        await startGateways(await startFleet(false), 3),
      );

      // A follow-up turn's prompt is 1/2 .. 3/4 conversation history: ideal hit rate about 0.65.
      expect(oneReplica).toBeGreaterThan(0.6);
      expect(threeWithEvents).toBeGreaterThanOrEqual(0.97 * oneReplica);
      expect(threeWithoutEvents).toBeLessThan(0.8 * threeWithEvents);
    },
  );

  it(
    "a replica that joins after traffic catches up from the publishers' replay: its follow-ups find the conversations",
    { timeout: 60_000 },
    async () => {
      const joinAfterTwoTurns = async (replay: boolean): Promise<number> => {
        const endpoints = await startFleet(true);
        const conv = startConversations();
        await replayConversations(await startGateways(endpoints, 1), conv, [0, 2]);
        // The replica that took the first turns goes; a new one takes every later turn.
        await gateways.splice(0)[0]?.close();
        const joined = await startGateways(replay ? endpoints : withoutReplay(endpoints), 1);
        const { hitRate } = await replayConversations(joined, conv, [2, TURNS]);
        await Promise.all(gateways.splice(0).map((g) => g.close()));
        await Promise.all(sims.splice(0).map((s) => s.close()));
        return hitRate;
      };
      const caughtUp = await joinAfterTwoTurns(true);
      const liveOnly = await joinAfterTwoTurns(false);
      // Turns 3 and 4 of a conversation: 2/3 and 3/4 of the prompt is history.
      expect(caughtUp).toBeGreaterThan(0.6);
      // Without the replay the joiner meets turn 3 blind: about a third of them land on their runtime.
      expect(liveOnly).toBeLessThan(0.85 * caughtUp);
    },
  );
});
