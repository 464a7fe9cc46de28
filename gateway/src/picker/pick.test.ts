// The picker called directly, as a second front end (an ext_proc server)
// would: a request as data in, the decision as data out, no HTTP.
import { afterEach, describe, expect, it } from 'vitest';
import { Admission, RequestRules, TenantLimits } from '#api';
import { computeTenantSalt } from '#sglang/salt.ts';
import type { ModelRoute } from '../routing/table.ts';
import type { Tenant } from '../tenancy/tenant.ts';
import { buildTestPicker, type TestPicker } from '../../../test/support/gateway/picker.ts';
import { buildTestEndpoint as ep, buildTestRoute } from '../../../test/support/gateway/routes.ts';
import type { PickResult } from './types.ts';

const PROMPT = 'You are a careful assistant. '.repeat(40);
const threeEndpoints = [
  ep('a', 'http://10.0.0.1:30000'),
  ep('b', 'http://10.0.0.2:30000'),
  ep('c', 'http://10.0.0.3:30000'),
];

function routed(r: PickResult): Extract<PickResult, { kind: 'routed' }> {
  if (r.kind !== 'routed') throw new Error(`expected a routed pick, got ${JSON.stringify(r)}`);
  return r;
}

function standaloneIds(r: PickResult): { endpoint: string; fallbacks: string[] } {
  const { target } = routed(r).decision;
  if (target.kind !== 'standalone') throw new Error('expected a standalone target');
  return { endpoint: target.endpoint.id, fallbacks: target.fallbacks.map((e) => e.id) };
}

describe('Picker.pick', () => {
  let t: TestPicker;
  afterEach(async () => t.close());

  it('chooses the endpoint holding the prompt prefix over one that misses it', async () => {
    t = buildTestPicker([
      buildTestRoute(threeEndpoints.slice(0, 2), { policy: 'cache-aware', reuse: false }),
    ]);
    const first = routed(await t.pickChat(PROMPT));
    // What the proxy reports once `b` served this prompt: the tree now says b holds it.
    const { policy } = first.lease;
    const { input } = first.decision;
    policy.observe?.({ kind: 'routed', endpoint: 'b', input });
    policy.observe?.({ kind: 'completed', endpoint: 'b', input });
    first.lease.release(undefined);

    expect(standaloneIds(await t.pickChat(PROMPT)).endpoint).toBe('b');
    // The same state, another prompt: a miss everywhere goes to the first of the least loaded.
    expect(standaloneIds(await t.pickChat('Something else entirely. '.repeat(40))).endpoint).toBe('a');
  });

  it('holds a miss made in a burst rank x the exchange delay before choosing, in a tier sharing load', async () => {
    const tierStanding = { rank: 1, size: 2, unheardMs: 20, bursty: true };
    t = buildTestPicker([buildTestRoute(threeEndpoints, { policy: 'cache-aware', reuse: false })], {
      tierStanding,
    });
    const miss = (k: number) => `Prompt number ${k} that no runtime holds. `.repeat(40);
    let settled = false;
    const held = t.pickChat(miss(9)).then((r) => {
      settled = true;
      return r;
    });
    for (let k = 0; k < 10; k++) await Promise.resolve();
    expect(settled).toBe(false);
    t.clock.advance(21);
    expect(routed(await held).decision.input.tier).toEqual(tierStanding);
  });

  it('picks only within what `within` admits (a subset hint), fallbacks too; none admitted: refused 503', async () => {
    t = buildTestPicker([buildTestRoute(threeEndpoints, { policy: 'least-load', reuse: false })]);
    const notA = (e: { id: string }): boolean => e.id !== 'a';
    const picked = standaloneIds(await t.pickChat('hi', { fallbacks: 2, within: notA }));
    expect([picked.endpoint, ...picked.fallbacks].sort()).toEqual(['b', 'c']);
    const none = await t.pickChat('hi', { within: () => false });
    expect(none.kind === 'refused' && none.verdict).toMatchObject({ status: 503, code: 'GW_NO_ENDPOINT' });
  });

  it('orders the fallbacks as the policy ranks the endpoints, as many as asked', async () => {
    t = buildTestPicker([buildTestRoute(threeEndpoints, { policy: 'least-load', reuse: false })]);
    t.book.track('a');
    t.book.track('a');
    t.book.track('c');
    expect(standaloneIds(await t.pickChat('hi', { fallbacks: 2 }))).toEqual({
      endpoint: 'b',
      fallbacks: ['c', 'a'],
    });
    expect(standaloneIds(await t.pickChat('hi', { fallbacks: 1 })).fallbacks).toEqual(['c']);
    expect(standaloneIds(await t.pickChat('hi')).fallbacks).toEqual([]);
  });

  it("stamps the cache salt: the route's, a tenant's own, the client's added", async () => {
    t = buildTestPicker([buildTestRoute(threeEndpoints.slice(0, 1), { reuse: false }, { salt: 'pol' })]);
    const tenant: Tenant = {
      id: 'team/alpha',
      deployments: new Set(['ns/m']),
      limits: TenantLimits.parse({}),
      priority: 0,
    };
    const open = routed(await t.pickChat('hi')).decision;
    expect(open.salt).toBe('pol');
    expect(open.body['cache_salt']).toBe('pol');
    const own = routed(await t.pickChat('hi', { tenant })).decision;
    expect(own.salt).toBe(computeTenantSalt('pol', 'team/alpha'));
    expect(own.body['cache_salt']).toBe(own.salt);
    expect(own.input.salt).toBe(own.salt);
    const withClient = routed(await t.pickChat('hi', { extra: { cache_salt: 'mine' } })).decision;
    expect(withClient.body['cache_salt']).toBe(withClient.salt);
    expect(withClient.salt).not.toBe('pol');
  });

  it('sheds a request past the admission bounds with 429 and Retry-After, as data', async () => {
    const admission = Admission.parse({ adaptive: false, maxConcurrency: 1, maxQueue: 0 });
    t = buildTestPicker([buildTestRoute(threeEndpoints.slice(0, 1), { reuse: false }, { admission })]);
    const held = routed(await t.pickChat('hi'));
    expect(held.verdict).toEqual({ kind: 'admit', queuedMs: 0 });
    const shed = await t.pickChat('hi');
    expect(shed).toMatchObject({
      kind: 'refused',
      verdict: {
        kind: 'shed',
        status: 429,
        code: 'GW_OVERLOADED',
        body: { error: { code: 'GW_OVERLOADED', type: 'rate_limit_error' } },
      },
    });
    const verdict = shed.kind === 'refused' ? shed.verdict : undefined;
    expect(verdict?.retryAfterSeconds).toBeGreaterThan(0);
    // The slot freed, the next is admitted.
    held.lease.release({ ok: true, latencyMs: 5 });
    expect((await t.pickChat('hi')).kind).toBe('routed');
  });

  it('refuses with the status and JSON error the proxy would send', async () => {
    t = buildTestPicker([buildTestRoute(threeEndpoints.slice(0, 1), { reuse: false })]);
    expect(await t.pickChat('hi', { extra: { model: 'nope' } })).toMatchObject({
      kind: 'refused',
      verdict: { kind: 'refuse', status: 404, code: 'GW_MODEL_NOT_FOUND' },
    });
  });

  it('returns a stored answer as is once an identical deterministic request produced it', async () => {
    t = buildTestPicker([buildTestRoute(threeEndpoints.slice(0, 1), { reuse: true })]);
    const greedy = { extra: { temperature: 0 } };
    const first = routed(await t.pickChat('hi', greedy));
    expect(first.lease.reuse).toBeDefined();
    const answer = { id: 'x', choices: [{ message: { content: 'hello' } }], usage: { prompt_tokens: 3 } };
    await first.lease.reuse?.settle({
      status: 200,
      contentType: 'application/json',
      body: JSON.stringify(answer),
    });
    first.lease.release({ ok: true, latencyMs: 1 });

    const again = await t.pickChat('hi', greedy);
    expect(again).toMatchObject({
      kind: 'reused',
      answer: { source: 'store', status: 200, headers: { 'x-cacheroute-reused': 'store' } },
    });
    const body = again.kind === 'reused' ? (JSON.parse(again.answer.body) as typeof answer) : undefined;
    expect(body?.choices).toEqual(answer.choices);
    // Sampled requests are never reused.
    expect((await t.pickChat('hi', { extra: { temperature: 1 } })).kind).toBe('routed');
  });

  it('pairs a prefill with a decode of its fingerprint and stamps the bootstrap fields', async () => {
    const pair: ModelRoute = buildTestRoute(
      [
        ep('p', 'http://10.0.1.1:30000', { role: 'prefill', bootstrapPort: 9000 }),
        ep('d-old', 'http://10.0.1.2:30000', { role: 'decode', fingerprint: 'fp0' }),
        ep('d', 'http://10.0.1.3:30000', { role: 'decode' }),
      ],
      { reuse: false },
    );
    t = buildTestPicker([pair], { random32: () => 0 });
    const { decision } = routed(await t.pickChat('hi'));
    expect(decision.target).toMatchObject({
      kind: 'pair',
      prefill: { id: 'p' },
      decode: { id: 'd' },
      bootstrap: { bootstrap_host: '10.0.1.1', bootstrap_port: 9000, bootstrap_room: 0 },
    });
    expect(decision.body).toMatchObject({
      bootstrap_host: '10.0.1.1',
      bootstrap_port: 9000,
      bootstrap_room: 0,
    });
  });

  describe('the runtime priority stamp', () => {
    const LONG = 'A document the runtime has not seen. '.repeat(1200);
    const onEndpoints = threeEndpoints.map((e) => ({ ...e, priorityScheduling: true }));
    const alpha = (priority: number): Tenant => ({
      id: 'team/alpha',
      deployments: new Set(['ns/m']),
      limits: TenantLimits.parse({}),
      priority,
    });

    it('stamps the tenant priority as the major key, the uncached bucket as the minor', async () => {
      t = buildTestPicker([buildTestRoute(onEndpoints, { reuse: false })]);
      expect(routed(await t.pickChat('hi')).decision.body['priority']).toBe(1);
      expect(routed(await t.pickChat(LONG)).decision.body['priority']).toBe(0);
      expect(routed(await t.pickChat('hi', { tenant: alpha(3) })).decision.body['priority']).toBe(7);
      expect(routed(await t.pickChat(LONG, { tenant: alpha(-2) })).decision.body['priority']).toBe(-4);
    });

    it('stamps nothing on endpoints whose status does not say they order by priority', async () => {
      t = buildTestPicker([buildTestRoute(threeEndpoints, { reuse: false })]);
      expect(routed(await t.pickChat('hi', { tenant: alpha(3) })).decision.body).not.toHaveProperty(
        'priority',
      );
    });

    it('stamps nothing when a fallback Envoy may send the same body to does not order by priority', async () => {
      const mixed = [onEndpoints[0], threeEndpoints[1]].filter((e) => e !== undefined);
      t = buildTestPicker([buildTestRoute(mixed, { policy: 'least-load', reuse: false })]);
      expect(routed(await t.pickChat('hi')).decision.body).toHaveProperty('priority', 1);
      expect(routed(await t.pickChat('hi', { fallbacks: 1 })).decision.body).not.toHaveProperty('priority');
    });

    it("keeps a client's own priority where the policy allows it", async () => {
      t = buildTestPicker([
        buildTestRoute(
          onEndpoints,
          { reuse: false },
          { requests: RequestRules.parse({ allowPrivilegedFields: ['priority'] }) },
        ),
      ]);
      expect(routed(await t.pickChat('hi', { extra: { priority: -9 } })).decision.body['priority']).toBe(-9);
    });

    it('stamps a prefill/decode pair when both order by priority', async () => {
      const pair = (on: boolean): ModelRoute =>
        buildTestRoute(
          [
            ep('p', 'http://10.0.1.1:30000', {
              role: 'prefill',
              bootstrapPort: 9000,
              priorityScheduling: true,
            }),
            ep('d', 'http://10.0.1.3:30000', { role: 'decode', priorityScheduling: on }),
          ],
          { reuse: false },
        );
      t = buildTestPicker([pair(true)], { random32: () => 0 });
      expect(routed(await t.pickChat('hi')).decision.body).toMatchObject({ priority: 1, bootstrap_room: 0 });
      await t.close();
      t = buildTestPicker([pair(false)], { random32: () => 0 });
      expect(routed(await t.pickChat('hi')).decision.body).not.toHaveProperty('priority');
    });
  });
});
