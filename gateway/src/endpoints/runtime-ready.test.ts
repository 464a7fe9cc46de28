import { afterEach, describe, expect, it } from 'vitest';
import { startSim, type RunningSim } from '../../../test/support/sim/testing.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { StaticRoutingTable } from '../routing/table.ts';
import { buildTestEndpoint, buildTestRoute } from '../../../test/support/gateway/routes.ts';
import { RuntimeReadyPoller, type ProbeStatus } from './runtime-ready.ts';
import { StandingEndpoints } from './standing.ts';

let sims: RunningSim[] = [];
afterEach(async () => {
  await Promise.all(sims.map((s) => s.close()));
  sims = [];
});

describe('RuntimeReadyPoller', () => {
  it('a simulator SIGTERMed leaves every pick at the next poll; another process there stands again', async () => {
    sims = await Promise.all([startSim(['--model-path', 'm']), startSim(['--model-path', 'm'])]);
    const [a, b] = sims.map((s, i) => buildTestEndpoint(`sim${i}`, s.url, { generation: 'ip#0' })) as [
      ReturnType<typeof buildTestEndpoint>,
      ReturnType<typeof buildTestEndpoint>,
    ];
    const table = new StaticRoutingTable([buildTestRoute([a, b])]);
    const clock = new ManualClock();
    const standing = new StandingEndpoints(clock);
    const poller = new RuntimeReadyPoller({ table, standing, clock, intervalMs: 1000 });
    await poller.pollOnce();
    expect(standing.list()).toEqual([]);
    void sims[0]?.server.terminate();
    await poller.pollOnce();
    expect(standing.list()).toEqual([{ id: 'sim0', reason: 'draining' }]);
    expect(standing.filter([a, b]).map((e) => e.id)).toEqual(['sim1']);
    // The table shows a new process at sim0's id (a restarted container): it stands.
    expect(standing.isStanding({ ...a, generation: 'ip#1' })).toBe(true);
  });

  it.each([
    ['503 marks it draining', [503], ['draining']],
    ['200 after 503 clears it', [503, 200], []],
    ['no answer changes nothing', [503, 'ECONNREFUSED'], ['draining']],
    ['another status (no /ready: 404) changes nothing', [503, 404], ['draining']],
    ['a 404 alone marks nothing', [404], []],
  ] as const)('%s', async (_name, answers, reasons) => {
    const clock = new ManualClock();
    const standing = new StandingEndpoints(clock);
    const table = new StaticRoutingTable([buildTestRoute([buildTestEndpoint('a', 'http://a:30000')])]);
    const queue: (number | string)[] = [...answers];
    const asked: string[] = [];
    const probe: ProbeStatus = (url) => {
      asked.push(url);
      const next = queue.shift();
      return typeof next === 'number' ? Promise.resolve(next) : Promise.reject(new Error(next));
    };
    const poller = new RuntimeReadyPoller({ table, standing, clock, intervalMs: 1000, probe });
    for (const _ of answers) await poller.pollOnce();
    expect(asked).toEqual(answers.map(() => 'http://a:30000/ready'));
    expect(standing.list().map((m) => m.reason)).toEqual(reasons);
  });

  it('asks ready endpoints only, one question out per endpoint, every interval until stopped', async () => {
    const clock = new ManualClock();
    const standing = new StandingEndpoints(clock);
    const table = new StaticRoutingTable([
      buildTestRoute([
        buildTestEndpoint('a', 'http://a:1'),
        buildTestEndpoint('b', 'http://b:1'),
        buildTestEndpoint('c', 'http://c:1', { ready: false }),
      ]),
    ]);
    const asked: string[] = [];
    let hang: (() => void) | undefined;
    const probe: ProbeStatus = (url) => {
      asked.push(new URL(url).host);
      // b never answers until told
      return url.startsWith('http://b') ? new Promise((r) => (hang = () => r(200))) : Promise.resolve(200);
    };
    const poller = new RuntimeReadyPoller({ table, standing, clock, intervalMs: 1000, probe });
    const answered = (): Promise<void> => new Promise((r) => setImmediate(r));
    poller.start();
    clock.advance(1000);
    await answered();
    clock.advance(1000);
    expect(asked).toEqual(['a:1', 'b:1', 'a:1']);
    hang?.();
    await answered();
    clock.advance(1000);
    expect(asked).toEqual(['a:1', 'b:1', 'a:1', 'a:1', 'b:1']);
    poller.stop();
    expect(clock.pendingTimers).toBe(0);
  });

  it('forgets the marks of endpoints the table no longer lists', async () => {
    const clock = new ManualClock();
    const standing = new StandingEndpoints(clock);
    const gone = buildTestEndpoint('gone', 'http://gone:1');
    standing.markDraining(gone);
    const table = new StaticRoutingTable([buildTestRoute([buildTestEndpoint('a', 'http://a:1')])]);
    const probe: ProbeStatus = () => Promise.resolve(200);
    await new RuntimeReadyPoller({ table, standing, clock, intervalMs: 1000, probe }).pollOnce();
    expect(standing.list()).toEqual([]);
  });
});
