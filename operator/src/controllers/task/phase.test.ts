import { describe, expect, it } from 'vitest';
import type { TaskResource } from '#api/resources.ts';
import type { TaskStatus } from '#api/task.ts';
import { FEEDBACK_PREFIX } from './attempt/prepare.ts';
import { planTaskStep, type TaskObservations, type TaskStep, TARGET_RECHECK_MS } from './phase.ts';
import { computeResultSha256 } from './result.ts';
import type { TaskTarget } from './attempt/target.ts';
import { buildTask } from '../../../../test/support/operator/task.ts';
import type { AttemptOutcome } from './attempt/types.ts';

const now = new Date('2026-01-01T01:00:00Z');

const sglangTarget: TaskTarget = {
  provider: 'sglang',
  identity: {
    provider: 'sglang',
    deploymentId: 'llama-a',
    identityFingerprint: 'f1',
    cacheSalt: 'salt',
    runtime: {
      modelPath: 'm',
      servedModelName: 'm',
      tokenizerPath: 'm',
      version: '0.5.23',
      tensorParallel: 1,
    },
  },
  route: { kind: 'standalone', urls: ['http://10.0.0.1:30000'] },
};
const okTarget = { ok: true as const, value: sglangTarget };
const obs = (o: Partial<TaskObservations> = {}): TaskObservations => ({ target: okTarget, ...o });

function generated(text: string, prompt = 5, completion = 3): AttemptOutcome {
  return {
    ok: true,
    value: {
      text,
      inputTokens: prompt,
      usage: { promptTokens: prompt, completionTokens: completion, cachedTokens: 0 },
    },
  };
}

function withStatus(task: TaskResource, status: TaskStatus): TaskResource {
  return { ...task, status };
}

/** Plays the shell: applies each step's status and feeds outcomes/reads until the task settles. */
function drive(
  task: TaskResource,
  o: {
    outcome?: (attempt: number) => AttemptOutcome;
    obs?: Partial<TaskObservations>;
    first?: Partial<TaskObservations>;
    maxSteps?: number;
  } = {},
): { task: TaskResource; steps: TaskStep[] } {
  const steps: TaskStep[] = [];
  let t = task;
  let extra: Partial<TaskObservations> = o.first ?? {};
  for (let i = 0; i < (o.maxSteps ?? 12); i++) {
    const step = planTaskStep(t, obs({ ...o.obs, ...extra }), now);
    steps.push(step);
    t = withStatus(t, step.status);
    extra = {};
    const gen = step.actions.find((a) => a.type === 'generate');
    if (gen?.type === 'generate')
      extra = { outcome: (o.outcome ?? (() => generated('hello')))(gen.call.attempt) };
    else if (!step.actions.some((a) => a.type === 'requeue' && a.afterMs === 0)) break;
  }
  return { task: t, steps };
}

const fpOf = (t: TaskResource) => planTaskStep(t, obs(), now).status.fingerprint ?? '';

describe('planTaskStep: Pending', () => {
  it('publishes the fingerprint first and requeues', () => {
    const step = planTaskStep(buildTask(), obs(), now);
    expect(step.status).toMatchObject({ phase: 'Pending', fingerprint: expect.stringMatching(/^sha256:/) });
    expect(step.status.runtimeIdentity).toMatchObject({ deploymentId: 'llama-a', cacheSalt: 'salt' });
    expect(step.actions).toEqual([{ type: 'requeue', afterMs: 0 }]);
  });

  it('then starts attempt 1 with a generate action', () => {
    const t = buildTask();
    const step = planTaskStep(withStatus(t, { phase: 'Pending', fingerprint: fpOf(t) }), obs(), now);
    expect(step.status.phase).toBe('Running');
    expect(step.status.attempts).toEqual([{ attempt: 1, startedAt: '2026-01-01T01:00:00Z' }]);
    expect(step.actions).toEqual([
      {
        type: 'generate',
        call: expect.objectContaining({
          attempt: 1,
          maxNewTokens: 16,
          prepared: { kind: 'text', rendering: 'cacheroute-plain-v1', text: 'Say hi.' },
          spent: 0n,
        }),
      },
    ]);
    expect(step.events).toEqual([{ type: 'Normal', reason: 'Generating', message: 'attempt 1: generating' }]);
  });

  it('waits for a target that is not routable yet while the task is young, then fails with the reason', () => {
    const target = {
      ok: false as const,
      error: { reason: 'TargetNotRoutable' as const, code: 'IdentityPending', message: 'not verified yet' },
    };
    const young = planTaskStep(buildTask({ created: '2026-01-01T00:55:00Z' }), { target }, now);
    expect(young.status.phase).toBe('Pending');
    expect(young.status.conditions?.find((c) => c.type === 'Progressing')).toMatchObject({
      reason: 'TargetNotRoutable',
      message: expect.stringContaining('not verified yet'),
    });
    expect(young.actions).toEqual([{ type: 'requeue', afterMs: TARGET_RECHECK_MS }]);
    const old = planTaskStep(buildTask({ created: '2026-01-01T00:49:00Z' }), { target }, now);
    expect(old.status.phase).toBe('Failed');
  });

  it.each<[string, TaskResource, Partial<TaskObservations>, string]>([
    [
      'TargetNotRoutable',
      buildTask(),
      { target: { ok: false, error: { reason: 'TargetNotRoutable', code: 'NoEndpoint', message: 'none' } } },
      'TargetNotRoutable',
    ],
    [
      'InputUnavailable',
      buildTask({ spec: { input: { configMapRef: { name: 'cm', key: 'k' } } } }),
      {},
      'InputUnavailable',
    ],
    [
      'BudgetExceeded (OpenRouter worst case before sending)',
      buildTask({
        spec: {
          target: {
            openrouter: {
              model: 'm/x',
              upstreamProvider: 'openai',
              inputTokenUpperBound: 100,
              cacheWriteUsage: 'not_applicable',
              apiKeySecretRef: { name: 's', key: 'k' },
            },
          },
          budget: {
            maxInputTokens: 100,
            prices: { inputPerMillion: '1000', outputPerMillion: '1000' },
            maxCost: '0.01',
          },
        },
      }),
      {
        target: {
          ok: true,
          value: {
            provider: 'openrouter',
            identity: {
              provider: 'openrouter',
              baseUrl: 'http://x',
              model: 'm/x',
              upstreamProvider: 'openai',
              cacheWriteUsage: 'not_applicable',
              inputTokenUpperBound: 100,
            },
          },
        },
      },
      'BudgetExceeded',
    ],
  ])('fails with %s', (_n, task, o, reason) => {
    const { task: end } = drive(task, { obs: o });
    expect(end.status?.phase).toBe('Failed');
    expect(end.status?.conditions?.find((c) => c.type === 'Failed')).toMatchObject({
      status: 'True',
      reason,
    });
  });
});

describe('planTaskStep: reuse', () => {
  const src = (result: TaskStatus['result'], fingerprint: string): TaskResource =>
    buildTask({
      name: 'src',
      created: '2025-12-31T00:00:00Z',
      status: {
        phase: 'Succeeded',
        fingerprint,
        completedAt: '2026-01-01T00:30:00Z',
        result,
        attempts: [{ attempt: 1, resultSha256: result?.sha256 }],
      },
    });

  it('becomes Reused with zero new generation, without calling a runtime', () => {
    const t = buildTask();
    const fp = fpOf(t);
    const result = { inline: 'hello', sha256: computeResultSha256('hello'), bytes: 5 };
    const step = planTaskStep(
      withStatus(t, { phase: 'Pending', fingerprint: fp }),
      obs({ candidates: [src(result, fp)] }),
      now,
    );
    expect(step.status).toMatchObject({
      phase: 'Reused',
      reusedFrom: { name: 'src', fingerprint: fp },
      result,
      usage: { promptTokens: 0, completionTokens: 0, cachedTokens: 0, newGeneration: false },
    });
    expect(step.actions).toEqual([]);
    expect(step.status.conditions?.find((c) => c.type === 'Complete')).toMatchObject({
      status: 'True',
      reason: 'Reused',
    });
  });

  it('reads a ConfigMap-held source result, then copies it into its own ConfigMap', () => {
    const t = buildTask();
    const fp = fpOf(t);
    const big = 'x'.repeat(20_000);
    const result = {
      configMapRef: { name: 'src-result', key: 'result' },
      sha256: computeResultSha256(big),
      bytes: 20_000,
    };
    const pending = withStatus(t, { phase: 'Pending', fingerprint: fp });
    const first = planTaskStep(pending, obs({ candidates: [src(result, fp)] }), now);
    expect(first.actions).toEqual([
      { type: 'readSourceResult', source: 'src', configMapRef: result.configMapRef },
    ]);
    const second = planTaskStep(pending, obs({ candidates: [src(result, fp)], sourceResultText: big }), now);
    expect(second.status.phase).toBe('Reused');
    expect(second.status.result?.configMapRef).toEqual({ name: 't1-result', key: 'result' });
    expect(second.actions[0]).toMatchObject({
      type: 'applyConfigMap',
      configMap: { metadata: { name: 't1-result' } },
    });
  });

  it('generates when the source text does not match its digest', () => {
    const t = buildTask();
    const fp = fpOf(t);
    const result = {
      configMapRef: { name: 'src-result', key: 'result' },
      sha256: computeResultSha256('a'),
      bytes: 1,
    };
    const step = planTaskStep(
      withStatus(t, { phase: 'Pending', fingerprint: fp }),
      obs({ candidates: [src(result, fp)], sourceResultText: 'b' }),
      now,
    );
    expect(step.status.phase).toBe('Running');
  });

  it('waits for an in-flight duplicate, or fails InFlight by policy', () => {
    const t = buildTask({ created: '2026-01-01T00:10:00Z' });
    const fp = fpOf(t);
    const running = buildTask({ name: 'other', status: { phase: 'Running', fingerprint: fp } });
    const waiting = planTaskStep(
      withStatus(t, { phase: 'Pending', fingerprint: fp }),
      obs({ candidates: [running] }),
      now,
    );
    expect(waiting.status.phase).toBe('Pending');
    expect(waiting.status.conditions?.find((c) => c.type === 'Progressing')).toMatchObject({
      reason: 'WaitingForInFlight',
    });
    expect(waiting.actions).toEqual([{ type: 'requeue', afterMs: 5000 }]);
    const failing = buildTask({ created: '2026-01-01T00:10:00Z', spec: { reuse: { onInFlight: 'Fail' } } });
    const failed = planTaskStep(
      withStatus(failing, { phase: 'Pending', fingerprint: fp }),
      obs({ candidates: [running] }),
      now,
    );
    expect(failed.status.conditions?.find((c) => c.type === 'Failed')).toMatchObject({
      status: 'True',
      reason: 'InFlight',
    });
  });
});

describe('planTaskStep: Running', () => {
  const running = (t = buildTask()): TaskResource =>
    withStatus(t, {
      phase: 'Running',
      fingerprint: fpOf(t),
      attempts: [{ attempt: 1, startedAt: '2026-01-01T00:59:00Z' }],
    });

  it('stores the result and usage, then goes to Checking', () => {
    const step = planTaskStep(running(), obs({ outcome: generated('hello', 5, 3) }), now);
    expect(step.status).toMatchObject({
      phase: 'Checking',
      result: { inline: 'hello', sha256: computeResultSha256('hello'), bytes: 5 },
      usage: { promptTokens: 5, completionTokens: 3, cachedTokens: 0, newGeneration: true },
      attempts: [
        {
          attempt: 1,
          usage: { promptTokens: 5, completionTokens: 3 },
          resultSha256: computeResultSha256('hello'),
        },
      ],
    });
    expect(step.actions).toEqual([{ type: 'requeue', afterMs: 0 }]);
  });

  it('fails closed when the outcome of the call was lost (no retry)', () => {
    const step = planTaskStep(running(), obs(), now);
    expect(step.status.phase).toBe('Failed');
    expect(step.status.conditions?.find((c) => c.type === 'Failed')).toMatchObject({
      reason: 'UsageUnknown',
      message: expect.stringContaining('OutcomeLost'),
    });
    expect(step.actions).toEqual([]);
  });

  it.each([
    'UsageUnknown',
    'ProviderError',
    'ProviderMismatch',
    'InputOverCap',
    'BudgetExceeded',
    'TargetNotRoutable',
    'DailyCapReached',
  ] as const)('fails with the provider reason %s', (reason) => {
    const step = planTaskStep(
      running(),
      obs({ outcome: { ok: false, error: { reason, code: 'X', message: 'why' } } }),
      now,
    );
    expect(step.status.phase).toBe('Failed');
    expect(step.status.conditions?.find((c) => c.type === 'Failed')).toMatchObject({
      reason,
      message: 'X: why',
    });
    expect(step.status.attempts?.[0]).toMatchObject({ outcome: reason, message: 'why' });
    expect(step.events).toEqual([{ type: 'Warning', reason, message: 'X: why' }]);
  });

  it('fails BudgetExceeded after the call and keeps the spent usage in the ledger', () => {
    const t = buildTask({
      spec: {
        budget: {
          maxInputTokens: 100,
          maxOutputTokens: 16,
          prices: { inputPerMillion: '1', outputPerMillion: '1' },
          maxCost: '0.000001',
        },
      },
    });
    const step = planTaskStep(running(t), obs({ outcome: generated('hello', 5, 3) }), now);
    expect(step.status.conditions?.find((c) => c.type === 'Failed')).toMatchObject({
      reason: 'BudgetExceeded',
    });
    expect(step.status.usage).toMatchObject({ promptTokens: 5, completionTokens: 3 });
    expect(step.status.cost).toBe('0.000008');
    expect(step.status.result).toBeUndefined();
  });
});

describe('planTaskStep: checks', () => {
  const regex = [{ name: 'greets', type: 'Regex', pattern: '^hello' }];

  it('succeeds when the checks pass', () => {
    const { task } = drive(buildTask({ spec: { checks: regex } }));
    expect(task.status).toMatchObject({
      phase: 'Succeeded',
      attempts: [{ attempt: 1, outcome: 'Succeeded' }],
    });
    expect(task.status?.conditions?.find((c) => c.type === 'Complete')).toMatchObject({
      status: 'True',
      reason: 'Succeeded',
    });
  });

  it('fails CheckFailed with which check and why', () => {
    const { task } = drive(buildTask({ spec: { checks: regex } }), { outcome: () => generated('bye') });
    expect(task.status?.conditions?.find((c) => c.type === 'Failed')).toMatchObject({
      reason: 'CheckFailed',
      message: 'check greets (Regex) failed: output does not match /^hello/',
    });
  });

  it.each([
    ['a backreference', '^(a)\\1'],
    ['a lookahead', 'hello(?= there)'],
    ['a syntax error', '('],
  ])('fails InvalidCheck before generating when RE2 cannot compile %s', (_n, pattern) => {
    const { task, steps } = drive(buildTask({ spec: { checks: [{ name: 'rx', type: 'Regex', pattern }] } }));
    expect(task.status?.phase).toBe('Failed');
    expect(task.status?.conditions?.find((c) => c.type === 'Failed')).toMatchObject({
      reason: 'InvalidCheck',
      message: expect.stringMatching(/^check rx \(Regex\): RE2 cannot compile the pattern/),
    });
    expect(steps.flatMap((s) => s.actions).some((a) => a.type === 'generate')).toBe(false);
    expect(task.status?.attempts ?? []).toEqual([]);
  });

  it('retries a failed check as a new attempt while checkRetries last', () => {
    const { task, steps } = drive(buildTask({ spec: { checks: regex, checkRetries: 1 } }), {
      outcome: (n) => generated(n === 1 ? 'bye' : 'hello there'),
    });
    expect(task.status?.phase).toBe('Succeeded');
    expect(task.status?.attempts?.map((a) => a.outcome)).toEqual(['CheckFailed', 'Succeeded']);
    expect(task.status?.usage).toMatchObject({ promptTokens: 10, completionTokens: 6 });
    expect(steps.flatMap((s) => s.events.map((e) => e.reason))).toContain('CheckRetry');
  });

  it('gives up after checkRetries', () => {
    const { task } = drive(buildTask({ spec: { checks: regex, checkRetries: 2 } }), {
      outcome: () => generated('bye'),
    });
    expect(task.status?.phase).toBe('Failed');
    expect(task.status?.attempts).toHaveLength(3);
  });

  it('reads a ConfigMap-held result before checking', () => {
    const t = buildTask({ spec: { checks: regex } });
    const big = `hello ${'x'.repeat(20_000)}`;
    const checking = withStatus(t, {
      phase: 'Checking',
      fingerprint: fpOf(t),
      attempts: [{ attempt: 1, resultSha256: computeResultSha256(big) }],
      result: {
        configMapRef: { name: 't1-result', key: 'result' },
        sha256: computeResultSha256(big),
        bytes: big.length,
      },
    });
    expect(planTaskStep(checking, obs(), now).actions).toEqual([
      { type: 'readResult', configMapRef: { name: 't1-result', key: 'result' } },
    ]);
    expect(planTaskStep(checking, obs({ resultText: big }), now).status.phase).toBe('Succeeded');
    expect(
      planTaskStep(checking, obs({ resultText: 'tampered' }), now).status.conditions?.find(
        (c) => c.type === 'Failed',
      ),
    ).toMatchObject({ reason: 'ResultUnavailable' });
  });
});

describe('planTaskStep: review', () => {
  const reviewed = (review: Record<string, unknown> = { required: true }) => buildTask({ spec: { review } });

  it('waits in AwaitingReview', () => {
    const { task } = drive(reviewed());
    expect(task.status?.phase).toBe('AwaitingReview');
    expect(task.status?.conditions?.find((c) => c.type === 'Reviewed')).toMatchObject({ status: 'Unknown' });
    expect(task.status?.conditions?.find((c) => c.type === 'Progressing')).toMatchObject({ status: 'False' });
  });

  it('succeeds on Accepted', () => {
    const { task } = drive(reviewed());
    const accepted = {
      ...task,
      spec: { ...task.spec, review: { required: true, decision: 'Accepted' as const } },
    };
    const step = planTaskStep(accepted, obs(), now);
    expect(step.status).toMatchObject({
      phase: 'Succeeded',
      attempts: [{ reviewDecision: 'Accepted', outcome: 'Succeeded' }],
    });
    expect(step.status.conditions?.find((c) => c.type === 'Reviewed')).toMatchObject({
      status: 'True',
      reason: 'Accepted',
    });
  });

  it('reworks with the feedback appended, keeps the history, and counts a decision once', () => {
    const { task } = drive(reviewed());
    const rework = {
      ...task,
      spec: { ...task.spec, review: { required: true, decision: 'Rework' as const, feedback: 'be formal' } },
    };
    const step = planTaskStep(rework, obs(), now);
    expect(step.status.phase).toBe('Running');
    expect(step.status.attempts?.[0]).toMatchObject({
      reviewDecision: 'Rework',
      reviewFeedback: 'be formal',
      outcome: 'Rework',
    });
    expect(step.actions[0]).toMatchObject({
      type: 'generate',
      call: { attempt: 2, prepared: { text: `Say hi.\n\n${FEEDBACK_PREFIX}be formal` } },
    });
    expect(step.status.fingerprint).toBe(task.status?.fingerprint);
    // attempt 2 comes back for review; the same (stale) Rework decision does not start attempt 3
    const { task: again } = drive(withStatus(rework, step.status), {
      first: { outcome: generated('Good day') },
    });
    expect(again.status?.phase).toBe('AwaitingReview');
    expect(again.status?.attempts).toHaveLength(2);
    expect(again.status?.result?.inline).toBe('Good day');
    // new feedback starts attempt 3 with both feedbacks in order
    const second = {
      ...again,
      spec: { ...again.spec, review: { required: true, decision: 'Rework' as const, feedback: 'shorter' } },
    };
    const step3 = planTaskStep(second, obs(), now);
    expect(step3.actions[0]).toMatchObject({
      call: {
        attempt: 3,
        prepared: { text: `Say hi.\n\n${FEEDBACK_PREFIX}be formal\n\n${FEEDBACK_PREFIX}shorter` },
      },
    });
  });

  it('fails a rework when the target identity changed since the start', () => {
    const { task } = drive(reviewed());
    const rework = {
      ...task,
      spec: { ...task.spec, review: { required: true, decision: 'Rework' as const, feedback: 'x' } },
    };
    const moved = {
      ok: true as const,
      value: { ...sglangTarget, identity: { ...sglangTarget.identity, deploymentId: 'llama-b' } },
    };
    const step = planTaskStep(rework, obs({ target: moved }), now);
    expect(step.status.conditions?.find((c) => c.type === 'Failed')).toMatchObject({
      reason: 'TargetNotRoutable',
    });
  });
});

describe('planTaskStep: terminal phases', () => {
  it.each(['Succeeded', 'Reused', 'Failed'] as const)('%s does nothing', (phase) => {
    const t = withStatus(buildTask(), { phase, fingerprint: 'sha256:x' });
    expect(planTaskStep(t, obs(), now)).toEqual({
      status: { phase, fingerprint: 'sha256:x', observedGeneration: 1 },
      actions: [],
      events: [],
    });
  });
});
