// Task core + providers against an in-process SGLang simulator and the local
// OpenRouter fixture, with a test-local shell loop (no Kubernetes needed): each
// seed scenario ends as the seed says, and the runtimes see exactly the calls
// they should.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TaskResource } from '#api/resources.ts';
import { computeTaskTarget } from '../../../operator/src/controllers/task/attempt/target.ts';
import { planTaskStep, type TaskObservations } from '../../../operator/src/controllers/task/phase.ts';
import { buildTask } from '../../support/operator/task.ts';
import type { TaskTarget } from '../../../operator/src/controllers/task/attempt/target.ts';
import { runGeneration, type ProviderDeps } from '../../../operator/src/controllers/task/providers/index.ts';
import { bootstrapPortOf, startSim, type RunningSim } from '../../support/sim/testing.ts';
import {
  FIXTURE_API_KEY,
  startOpenRouterFixture,
  type OpenRouterFixture,
} from '../../fixtures/openrouter/server.ts';

const now = new Date('2026-01-01T01:00:00Z');

/** The shell, reduced: plan, perform generate/requeue-now, plan again, until the task settles. */
async function runTask(
  task: TaskResource,
  obs: Omit<TaskObservations, 'outcome'>,
  deps: ProviderDeps,
): Promise<TaskResource> {
  let t = task;
  let outcome: TaskObservations['outcome'];
  for (let i = 0; i < 16; i++) {
    const step = planTaskStep(t, { ...obs, outcome }, now);
    t = { ...t, status: step.status };
    outcome = undefined;
    const gen = step.actions.find((a) => a.type === 'generate');
    if (gen?.type === 'generate') {
      outcome = await runGeneration(gen.call, deps);
      continue;
    }
    if (!step.actions.some((a) => a.type === 'requeue' && a.afterMs === 0)) break;
  }
  return t;
}

const failedReason = (t: TaskResource) =>
  t.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True');

describe('SGLang provider against the simulator', () => {
  let sim: RunningSim;
  const seen: string[] = [];

  beforeAll(async () => {
    sim = await startSim(['--model-path', 'meta-llama/Llama-3.1-8B-Instruct', '--enable-cache-report']);
    sim.server.server.on('request', (req: { method?: string; url?: string }) =>
      seen.push(`${req.method} ${req.url}`),
    );
  });
  afterAll(() => sim.close());
  afterEach(() => {
    seen.length = 0;
  });

  type SglangTarget = Extract<TaskTarget, { provider: 'sglang' }>;
  const target = (deploymentId = 'llama-a', cacheSalt = 'salt-a'): SglangTarget => ({
    provider: 'sglang',
    identity: {
      provider: 'sglang',
      deploymentId,
      identityFingerprint: 'f1',
      cacheSalt,
      runtime: {
        modelPath: 'm',
        servedModelName: 'm',
        tokenizerPath: 'm',
        version: '0.5.23',
        tensorParallel: 1,
      },
    },
    route: { kind: 'standalone', urls: [sim.url] },
  });
  const obs = (t = target(), candidates: TaskResource[] = []) => ({
    target: { ok: true as const, value: t },
    candidates,
  });
  const prompt = 'Summarize the quarterly report in three short sentences please.';
  const generates = () => seen.filter((s) => s === 'POST /generate').length;

  async function tokenCount(text: string): Promise<number> {
    const r = await fetch(`${sim.url}/tokenize`, { method: 'POST', body: JSON.stringify({ prompt: text }) });
    return ((await r.json()) as { count: number }).count;
  }

  it('succeeds with exact usage read back from meta_info', async () => {
    const task = buildTask({
      name: 'exact',
      spec: { input: { prompt }, maxOutputTokens: 8, reuse: { enabled: false } },
    });
    const n = await tokenCount(prompt);
    seen.length = 0;
    const first = await runTask(task, obs(target('exact-1', 'salt-exact')), {});
    expect(first.status?.phase).toBe('Succeeded');
    expect(first.status?.usage).toEqual({
      promptTokens: n,
      completionTokens: 8,
      cachedTokens: 0,
      cachedTokensDevice: 0,
      cachedTokensHost: 0,
      newGeneration: true,
    });
    expect(seen).toEqual(['POST /tokenize', 'POST /generate']);
    // The same prompt under the same salt meets its KV: a new generation, with cache hits reported.
    const second = await runTask(
      buildTask({
        name: 'exact2',
        spec: { input: { prompt }, maxOutputTokens: 8, reuse: { enabled: false } },
      }),
      obs(target('exact-1', 'salt-exact')),
      {},
    );
    expect(second.status?.usage?.cachedTokens).toBeGreaterThan(0);
    expect(second.status?.usage?.cachedTokens).toBe(
      (second.status?.usage?.cachedTokensDevice ?? 0) + (second.status?.usage?.cachedTokensHost ?? 0),
    );
    // Another salt never meets that KV.
    const other = await runTask(
      buildTask({
        name: 'exact3',
        spec: { input: { prompt }, maxOutputTokens: 8, reuse: { enabled: false } },
      }),
      obs(target('exact-1', 'salt-other')),
      {},
    );
    expect(other.status?.usage?.cachedTokens).toBe(0);
  });

  it('reuses an identical second task with zero new generation, and the simulator sees no request', async () => {
    const first = await runTask(buildTask({ name: 'a', spec: { input: { prompt: 'reuse me' } } }), obs(), {});
    expect(first.status?.phase).toBe('Succeeded');
    seen.length = 0;
    const second = await runTask(
      buildTask({ name: 'b', spec: { input: { prompt: 'reuse me' } } }),
      obs(target(), [first]),
      {},
    );
    expect(second.status).toMatchObject({
      phase: 'Reused',
      reusedFrom: { name: 'a', fingerprint: first.status?.fingerprint },
      result: first.status?.result,
      usage: { promptTokens: 0, completionTokens: 0, newGeneration: false },
    });
    expect(seen).toEqual([]);
  });

  it.each([
    ['a changed deploymentId', 'llama-b', 'salt-a'],
    ['a changed cache salt', 'llama-a', 'salt-b'],
  ])('does not reuse across %s', async (_n, deploymentId, salt) => {
    const changed = target(deploymentId, salt);
    const first = await runTask(buildTask({ name: 'c', spec: { input: { prompt: 'identity' } } }), obs(), {});
    seen.length = 0;
    const second = await runTask(
      buildTask({ name: 'd', spec: { input: { prompt: 'identity' } } }),
      obs(changed, [first]),
      {},
    );
    expect(second.status?.phase).toBe('Succeeded');
    expect(second.status?.reusedFrom).toBeUndefined();
    expect(generates()).toBe(1);
  });

  it('generates once for concurrent duplicates: the later one waits, then reuses', async () => {
    const spec = { input: { prompt: 'concurrent duplicate' } };
    let a = buildTask({ name: 'dup-a', created: '2026-01-01T00:00:00Z', spec });
    let b = buildTask({ name: 'dup-b', created: '2026-01-01T00:00:00Z', spec });
    // Both publish their fingerprint first.
    a = { ...a, status: planTaskStep(a, obs(), now).status };
    b = { ...b, status: planTaskStep(b, obs(), now).status };
    const bStep = planTaskStep(b, obs(target(), [a, b]), now);
    expect(bStep.status.conditions?.find((c) => c.type === 'Progressing')).toMatchObject({
      reason: 'WaitingForInFlight',
    });
    b = { ...b, status: bStep.status };
    a = await runTask(a, obs(target(), [a, b]), {});
    expect(a.status?.phase).toBe('Succeeded');
    b = await runTask(b, obs(target(), [a, b]), {});
    expect(b.status).toMatchObject({ phase: 'Reused', reusedFrom: { name: 'dup-a' } });
    expect(generates()).toBe(1);
  });

  it('fails InputOverCap before any /generate', async () => {
    const task = buildTask({
      name: 'big',
      spec: { input: { prompt: 'word '.repeat(50) }, budget: { maxInputTokens: 10 } },
    });
    const end = await runTask(task, obs(), {});
    expect(end.status?.phase).toBe('Failed');
    expect(failedReason(end)).toMatchObject({ reason: 'InputOverCap' });
    expect(seen).toEqual(['POST /tokenize']);
  });

  it('fails a cost cap with the counted input before any /generate', async () => {
    const task = buildTask({
      name: 'dear',
      spec: {
        input: { prompt: 'short' },
        budget: {
          maxInputTokens: 100,
          prices: { inputPerMillion: '1000000', outputPerMillion: '0' },
          maxCost: '1',
        },
      },
    });
    const end = await runTask(task, obs(), {});
    expect(failedReason(end)).toMatchObject({ reason: 'BudgetExceeded' });
    expect(generates()).toBe(0);
  });

  it('fails ProviderError on a runtime error, once (no retry)', async () => {
    const flaky = await startSim(['--model-path', 'm', '--sim-fail-first', '5']);
    try {
      const t: SglangTarget = { ...target(), route: { kind: 'standalone', urls: [flaky.url] } };
      const end = await runTask(buildTask({ name: 'flaky' }), obs(t), {});
      expect(failedReason(end)).toMatchObject({
        reason: 'ProviderError',
        message: expect.stringContaining('HTTP500'),
      });
    } finally {
      await flaky.close();
    }
  });

  it('runs a disaggregated target through the prefill/decode pair and reads the decode usage', async () => {
    const args = ['--model-path', 'm', '--enable-cache-report', '--disaggregation-mode'];
    const prefill = await startSim([...args, 'prefill', '--disaggregation-bootstrap-port', '0']);
    const bsPort = bootstrapPortOf(prefill);
    const decode = await startSim([...args, 'decode', '--sim-pd-timeout-ms', '5000']);
    try {
      const t: SglangTarget = {
        ...target('pd-1', 'salt-pd'),
        route: {
          kind: 'pd',
          prefill: [{ url: prefill.url, bootstrapHost: '127.0.0.1', bootstrapPort: bsPort }],
          decode: [decode.url],
        },
      };
      const end = await runTask(
        buildTask({ name: 'pd', spec: { input: { prompt: 'split me' }, maxOutputTokens: 6 } }),
        obs(t),
        {},
      );
      expect(end.status?.phase).toBe('Succeeded');
      expect(end.status?.usage).toMatchObject({ completionTokens: 6, newGeneration: true });
    } finally {
      await Promise.all([prefill.close(), decode.close()]);
    }
  });

  it('resolves a Deployment target from its status and fails when it is not routable', () => {
    const r = computeTaskTarget(buildTask().spec, { deployment: undefined, cacheSalt: 's' });
    expect(r).toMatchObject({ ok: false, error: { reason: 'TargetNotRoutable', code: 'NotFound' } });
  });
});

describe('OpenRouter provider against the fixture', () => {
  let fx: OpenRouterFixture;
  beforeAll(async () => {
    fx = await startOpenRouterFixture();
  });
  afterAll(() => fx.close());
  afterEach(() => {
    fx.requests.length = 0;
    fx.script('success');
  });

  const orSpec = (
    cacheWriteUsage: 'required' | 'not_applicable' = 'required',
    extra: Record<string, unknown> = {},
  ) => ({
    target: {
      openrouter: {
        model: 'openai/gpt-4.1-mini',
        upstreamProvider: 'openai',
        inputTokenUpperBound: 64,
        cacheWriteUsage,
        apiKeySecretRef: { name: 'openrouter', key: 'apiKey' },
      },
    },
    input: {
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello.' },
      ],
    },
    // A paid call needs prices and a cost cap (CEL); these are far above what the fixture charges.
    budget: {
      maxInputTokens: 100,
      prices: { inputPerMillion: '1', outputPerMillion: '1' },
      maxCost: '1',
    },
    reuse: { enabled: false },
    ...extra,
  });
  const run = (task: TaskResource, apiKey = FIXTURE_API_KEY) => {
    const target = computeTaskTarget(task.spec, { openrouterBaseUrl: fx.baseUrl });
    return runTask(task, { target }, { openrouter: { baseUrl: fx.baseUrl }, apiKey });
  };

  it('succeeds, sending exactly one pinned, text-only request with the key only in Authorization', async () => {
    const end = await run(
      buildTask({ name: 'or-ok', spec: orSpec('required', { sampling: { temperature: 0, seed: 7 } }) }),
    );
    expect(end.status?.phase).toBe('Succeeded');
    expect(end.status?.usage).toEqual({
      promptTokens: 12,
      completionTokens: 4,
      cachedTokens: 8,
      cacheWriteTokens: 2,
      newGeneration: true,
    });
    expect(end.status?.result?.inline).toBe('Hello from the fixture.');
    expect(end.status?.runtimeIdentity).toMatchObject({
      model: 'openai/gpt-4.1-mini',
      upstreamProvider: 'openai',
      servedBy: 'OpenAI',
    });
    expect(fx.requests).toHaveLength(1);
    const req = fx.requests[0];
    expect(req?.path).toBe('/api/v1/chat/completions');
    expect(req?.body).toEqual({
      model: 'openai/gpt-4.1-mini',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello.' },
      ],
      max_tokens: 16,
      temperature: 0,
      seed: 7,
      stream: false,
      provider: {
        only: ['openai'],
        order: ['openai'],
        allow_fallbacks: false,
        require_parameters: true,
        max_price: { request: 0 },
      },
      usage: { include: true },
    });
    expect(req?.headers.authorization).toBe(`Bearer ${FIXTURE_API_KEY}`);
    const elsewhere = Object.entries(req?.headers ?? {}).filter(
      ([k, v]) => k !== 'authorization' && String(v).includes(FIXTURE_API_KEY),
    );
    expect(elsewhere).toEqual([]);
    expect(req?.rawBody).not.toContain(FIXTURE_API_KEY);
    expect(req?.path).not.toContain(FIXTURE_API_KEY);
    expect(JSON.stringify(end.status)).not.toContain(FIXTURE_API_KEY);
  });

  it('accepts an absent write counter under not_applicable', async () => {
    fx.script('success-no-write');
    const end = await run(buildTask({ name: 'or-na', spec: orSpec('not_applicable') }));
    expect(end.status?.phase).toBe('Succeeded');
    expect(end.status?.usage).toMatchObject({ cacheWriteTokens: 0, cachedTokens: 0 });
  });

  it.each<
    [string, Parameters<OpenRouterFixture['script']>[0], 'required' | 'not_applicable', string, string]
  >([
    ['unknown usage', 'unknown-usage', 'not_applicable', 'UsageUnknown', 'UsageMissing'],
    ['contradictory counters', 'contradictory-counters', 'required', 'UsageUnknown', 'CountersContradictory'],
    [
      'a response from another provider',
      'provider-mismatch',
      'required',
      'ProviderMismatch',
      'ProviderMismatch',
    ],
    [
      'a missing write counter under required',
      'missing-write-counter',
      'required',
      'UsageUnknown',
      'CounterMissing',
    ],
    ['HTTP 500', { status: 500 }, 'required', 'ProviderError', 'HTTP500'],
    ['HTTP 429', { status: 429 }, 'required', 'ProviderError', 'HTTP429'],
    [
      'HTTP 402',
      { status: 402, body: { error: { message: `key ${FIXTURE_API_KEY} has no credit` } } },
      'required',
      'ProviderError',
      'HTTP402',
    ],
  ])(
    'fails closed on %s, after exactly one request (never retried)',
    async (_n, scenario, cwu, reason, code) => {
      fx.script(scenario);
      const end = await run(buildTask({ name: 'or-fail', spec: orSpec(cwu) }));
      expect(end.status?.phase).toBe('Failed');
      expect(failedReason(end)).toMatchObject({ reason, message: expect.stringContaining(code) });
      expect(fx.requests).toHaveLength(1);
      expect(end.status?.result).toBeUndefined();
      expect(JSON.stringify(end.status)).not.toContain(FIXTURE_API_KEY);
    },
  );

  it('never puts a wrong key into status', async () => {
    const wrong = 'sk-or-wrong-key-xyz';
    const end = await run(buildTask({ name: 'or-401', spec: orSpec() }), wrong);
    expect(failedReason(end)).toMatchObject({
      reason: 'ProviderError',
      message: expect.stringContaining('HTTP401'),
    });
    expect(JSON.stringify(end.status)).not.toContain(wrong);
  });

  it('fails InputOverCap on a reservation over the input cap without sending', async () => {
    const t = buildTask({ name: 'or-cap', spec: orSpec() });
    const over = { ...t, spec: { ...t.spec, budget: { ...t.spec.budget, maxInputTokens: 32 } } };
    const end = await run(over);
    expect(failedReason(end)).toMatchObject({ reason: 'InputOverCap' });
    expect(fx.requests).toHaveLength(0);
  });

  it('does not send anywhere but the operator-configured base URL', async () => {
    const t = buildTask({ name: 'or-url', spec: orSpec() });
    const target = computeTaskTarget(t.spec, { openrouterBaseUrl: 'http://127.0.0.1:9/api/v1' });
    const end = await runTask(
      t,
      { target },
      { openrouter: { baseUrl: fx.baseUrl }, apiKey: FIXTURE_API_KEY },
    );
    expect(failedReason(end)).toMatchObject({
      reason: 'ProviderError',
      message: expect.stringContaining('BaseUrlChanged'),
    });
    expect(fx.requests).toHaveLength(0);
  });
});
