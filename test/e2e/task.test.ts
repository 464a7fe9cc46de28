// Tasks end to end: the full control plane, KWOK GPU nodes with an SGLang
// simulator on each pod IP, the operator (its Task controller included) and
// the local OpenRouter fixture behind --openrouter-base-url. Every claim about
// what a runtime saw is read from the simulators' own counters or the
// fixture's request log.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CachePolicyStatus, DeploymentStatus, TaskStatus } from '#api';
import { parseDecimal } from '../../operator/src/controllers/task/attempt/budget.ts';
import { computeLedgerKey, LEDGER_CONFIGMAP } from '../../operator/src/controllers/task/daily-cap.ts';
import { startOperator, type Operator } from '../../operator/src/operator.ts';
import { createLogger } from '#kube/logger.ts';
import { createEngineCounters, type EngineCounters } from '../sim/engine.ts';
import {
  FIXTURE_API_KEY,
  startOpenRouterFixture,
  type OpenRouterFixture,
  type Scenario,
} from '../fixtures/openrouter/server.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { eventually, kubectlOk, listEvents } from '../support/kubectl.ts';
import { REPO_ROOT } from '../support/samples.ts';
import { buildRuntimeAuthHeader, startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';
import {
  buildOpenRouterTaskManifest,
  buildSecretManifest,
  buildSglangTaskManifest,
} from '../support/task-builders.ts';

const NS = 'e2e-task';
const DEPLOYMENT = 'dense';
const POLICY = 'team';
const SECRET = { name: 'openrouter', key: 'api-key' };
const TASKS = 'tasks.cacheroute.dev';
let cp: ControlPlane;
let kubelet: SimKubelet;
let operator: Operator;
let fx: OpenRouterFixture;
const operatorLog: string[] = [];

async function k(args: string[], input?: string): Promise<string> {
  return kubectlOk(['-n', NS, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });
}

async function create(manifest: unknown): Promise<void> {
  await k(['create', '-f', '-'], JSON.stringify(manifest));
}

async function getJson<T>(resource: string, name: string): Promise<T> {
  return JSON.parse(await k(['get', resource, name, '-o', 'json'])) as T;
}

const taskStatus = async (name: string): Promise<TaskStatus> =>
  (await getJson<{ status?: TaskStatus }>(TASKS, name)).status ?? {};

const condition = (s: { conditions?: { type: string }[] | undefined }, type: string) =>
  s.conditions?.find((c) => c.type === type) as
    { type: string; status: string; reason: string; message: string } | undefined;

async function waitForPhase(
  name: string,
  phase: TaskStatus['phase'],
  timeoutMs = 60_000,
): Promise<TaskStatus> {
  return eventually(
    async () => {
      const s = await taskStatus(name);
      expect(s.phase).toBe(phase);
      return s;
    },
    { timeoutMs },
  );
}

const events = (name: string) => listEvents(cp.kubeconfig, NS, name);

/** The simulators' engine counters, summed over every running pod of the Deployment. */
function simCounters(): EngineCounters {
  const sum = createEngineCounters();
  for (const sim of kubelet.sims.values()) {
    const c = sim.server.engine.counters;
    for (const key of Object.keys(sum) as (keyof EngineCounters)[]) sum[key] += c[key];
  }
  return sum;
}

const generated = (): number => simCounters().requests;

async function deploymentStatus(): Promise<DeploymentStatus> {
  return (await getJson<{ status?: DeploymentStatus }>('sgd', DEPLOYMENT)).status ?? {};
}

async function waitForRoutable(deploymentId: string): Promise<DeploymentStatus> {
  return eventually(
    async () => {
      const s = await deploymentStatus();
      expect(s.identity?.deploymentId).toBe(deploymentId);
      expect(s.routable?.value).toBe(true);
      expect(s.endpoints?.length).toBe(1);
      expect(s.endpoints?.every((e) => e.verified && e.fingerprint === s.identity?.fingerprint)).toBe(true);
      return s;
    },
    { timeoutMs: 90_000 },
  );
}

async function policySalt(deploymentId: string): Promise<string> {
  return eventually(
    async () => {
      const s = (await getJson<{ status?: CachePolicyStatus }>('cachepolicies.cacheroute.dev', POLICY))
        .status;
      const t = s?.targets?.find((x) => x.name === DEPLOYMENT);
      expect(t).toMatchObject({ accepted: true, deploymentId });
      expect(t?.cacheSalt).toBeTruthy();
      return t?.cacheSalt ?? '';
    },
    { timeoutMs: 30_000 },
  );
}

async function tokenCount(text: string): Promise<number> {
  const sim = [...kubelet.sims.values()][0];
  // The runtime takes its own API key (SGLang's --api-key), as from the operator and the gateway.
  const r = await fetch(`http://${sim?.ip ?? ''}:30000/tokenize`, {
    method: 'POST',
    headers: buildRuntimeAuthHeader(sim?.argv ?? []),
    body: JSON.stringify({ prompt: text, add_special_tokens: true }),
  });
  return ((await r.json()) as { count: number }).count;
}

const sglangTask = (name: string, prompt: string, spec: Record<string, unknown> = {}) =>
  buildSglangTaskManifest({ name, deployment: DEPLOYMENT, prompt, spec });

async function patchReview(name: string, review: Record<string, unknown>): Promise<void> {
  await k(['patch', TASKS, name, '--type', 'merge', '-p', JSON.stringify({ spec: { review } })]);
}

beforeAll(async () => {
  cp = await startControlPlane({ full: true, gpuNodes: 1 });
  await kubectlOk(['apply', '--server-side', '-f', join(REPO_ROOT, 'crds')], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(REPO_ROOT, 'crds')], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  kubelet = await startSimKubelet({ kubeconfig: cp.kubeconfig });
  fx = await startOpenRouterFixture();
  operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({
      level: 'debug',
      fields: { component: 'operator' },
      write: (line) => {
        operatorLog.push(line);
        if (/"level":"(warn|error)"/.test(line)) process.stderr.write(line);
      },
    }),
    leaderElection: { namespace: NS, name: 'cacheroute-operator' },
    http: { host: '127.0.0.1', port: 0 },
    openrouterBaseUrl: fx.baseUrl,
    // Above what this suite's other paid tasks reserve (about 0.001 each), below the one that must be refused.
    dailyCap: { amount: parseDecimal('0.02'), currency: 'USD' },
  });
  await create(buildDeploymentManifest({ name: DEPLOYMENT, replicas: 1 }));
  await create(buildCachePolicyManifest(POLICY, [DEPLOYMENT]));
  await create(buildSecretManifest(SECRET.name, { [SECRET.key]: FIXTURE_API_KEY }));
  await waitForRoutable('llama-3-1-8b-instruct-r1');
  await policySalt('llama-3-1-8b-instruct-r1');
});

afterAll(async () => {
  await operator?.stop();
  await fx?.close();
  await kubelet?.stop();
  await cp?.stop();
});

const FIRST_PROMPT = 'Summarize the quarterly report in three short sentences, please.';

describe('task on an SGLang Deployment', () => {
  it('succeeds with the exact usage the runtime reported in meta_info', async () => {
    const salt = await policySalt('llama-3-1-8b-instruct-r1');
    const expectedPrompt = await tokenCount(FIRST_PROMPT);
    const before = simCounters();
    await create(sglangTask('first', FIRST_PROMPT));
    const s = await waitForPhase('first', 'Succeeded');
    const after = simCounters();
    expect(after.requests - before.requests).toBe(1);
    expect(s.usage).toEqual({
      promptTokens: expectedPrompt,
      completionTokens: 8,
      cachedTokens: 0,
      cachedTokensDevice: 0,
      cachedTokensHost: 0,
      newGeneration: true,
    });
    // The runtime's own accounting of that one request.
    expect(after.promptTokens - before.promptTokens).toBe(expectedPrompt);
    expect(after.generationTokens - before.generationTokens).toBe(8);
    expect(after.cachedTokens - before.cachedTokens).toBe(0);
    expect(s.runtimeIdentity).toMatchObject({
      provider: 'sglang',
      deploymentId: 'llama-3-1-8b-instruct-r1',
      cacheSalt: salt,
      servedModelName: 'llama-8b',
    });
    expect(s.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(s.result?.inline).toBeTypeOf('string');
    expect(s.attempts).toHaveLength(1);
    expect(condition(s, 'Complete')).toMatchObject({ status: 'True', reason: 'Succeeded' });
    await eventually(async () =>
      expect((await events('first')).map((e) => e.reason)).toEqual(
        expect.arrayContaining(['Pending', 'Generating', 'Checking', 'Succeeded']),
      ),
    );
  });

  it('reuses an identical second task with zero new generation: the runtime sees no request', async () => {
    const source = await taskStatus('first');
    const before = simCounters();
    await create(sglangTask('second', FIRST_PROMPT));
    const s = await waitForPhase('second', 'Reused');
    expect(s).toMatchObject({
      reusedFrom: { name: 'first', fingerprint: source.fingerprint },
      fingerprint: source.fingerprint,
      result: source.result,
      usage: { promptTokens: 0, completionTokens: 0, cachedTokens: 0, newGeneration: false },
    });
    expect(s.attempts ?? []).toEqual([]);
    expect(simCounters()).toEqual(before);
    expect(condition(s, 'Complete')).toMatchObject({ status: 'True', reason: 'Reused' });
  });

  it('generates once for concurrent duplicates; the others wait and reuse it', async () => {
    const before = generated();
    const names = ['dup-a', 'dup-b', 'dup-c', 'dup-d'];
    const list = {
      apiVersion: 'v1',
      kind: 'List',
      items: names.map((n) => sglangTask(n, 'A concurrent duplicate.')),
    };
    await create(list);
    const ends = await eventually(
      async () => {
        const all = await Promise.all(names.map(taskStatus));
        for (const s of all) expect(['Succeeded', 'Reused']).toContain(s.phase);
        return all;
      },
      { timeoutMs: 60_000 },
    );
    const sources = names.filter((_, i) => ends[i]?.phase === 'Succeeded');
    expect(sources).toHaveLength(1);
    for (const s of ends.filter((x) => x.phase === 'Reused')) expect(s.reusedFrom?.name).toBe(sources[0]);
    expect(generated() - before).toBe(1);
  });

  it('fails InputOverCap before sending: the runtime sees no generation', async () => {
    const before = generated();
    await create(sglangTask('over-cap', 'word '.repeat(64), { budget: { maxInputTokens: 10 } }));
    const s = await waitForPhase('over-cap', 'Failed');
    expect(condition(s, 'Failed')).toMatchObject({ status: 'True', reason: 'InputOverCap' });
    expect(s.usage?.newGeneration).not.toBe(true);
    expect(generated()).toBe(before);
    await eventually(async () =>
      expect(await events('over-cap')).toEqual(
        expect.arrayContaining([expect.objectContaining({ type: 'Warning', reason: 'InputOverCap' })]),
      ),
    );
  });

  it('fails CheckFailed naming the check after its bounded retry', async () => {
    const before = generated();
    const checks = [{ name: 'json-object', type: 'JSONSchema', schema: '{"type":"object"}' }];
    await create(sglangTask('checked', 'Answer in JSON.', { checks, checkRetries: 1 }));
    const s = await waitForPhase('checked', 'Failed');
    expect(condition(s, 'Failed')).toMatchObject({
      reason: 'CheckFailed',
      message: expect.stringContaining('check json-object (JSONSchema) failed'),
    });
    expect(s.attempts?.map((a) => a.outcome)).toEqual(['CheckFailed', 'CheckFailed']);
    expect(generated() - before).toBe(2);
    expect(s.usage?.completionTokens).toBe(16); // the ledger covers both attempts
  });

  it('waits for review and succeeds when a person accepts', async () => {
    await create(sglangTask('review-accept', 'Draft a release note.', { review: { required: true } }));
    const waiting = await waitForPhase('review-accept', 'AwaitingReview');
    expect(condition(waiting, 'Reviewed')).toMatchObject({ status: 'Unknown', reason: 'AwaitingReview' });
    await patchReview('review-accept', { required: true, decision: 'Accepted' });
    const s = await waitForPhase('review-accept', 'Succeeded');
    expect(condition(s, 'Reviewed')).toMatchObject({ status: 'True', reason: 'Accepted' });
    expect(condition(s, 'Complete')).toMatchObject({ status: 'True', reason: 'Accepted' });
    expect(s.attempts?.[0]).toMatchObject({ reviewDecision: 'Accepted', outcome: 'Succeeded' });
  });

  it('reworks with the feedback, keeps the attempt history, and never reuses the rejected answer', async () => {
    const before = generated();
    const prompt = 'Write a haiku about caches.';
    await create(sglangTask('review-rework', prompt, { review: { required: true } }));
    const first = await waitForPhase('review-rework', 'AwaitingReview');
    const rejected = first.result?.sha256;
    await patchReview('review-rework', { required: true, decision: 'Rework', feedback: 'Mention GPUs.' });
    const second = await eventually(
      async () => {
        const s = await taskStatus('review-rework');
        expect(s.phase).toBe('AwaitingReview');
        expect(s.attempts).toHaveLength(2);
        return s;
      },
      { timeoutMs: 60_000 },
    );
    expect(second.attempts?.[0]).toMatchObject({
      reviewDecision: 'Rework',
      reviewFeedback: 'Mention GPUs.',
      resultSha256: rejected,
    });
    expect(second.result?.sha256).toBe(second.attempts?.[1]?.resultSha256);
    expect(second.result?.sha256).not.toBe(rejected);
    expect(generated() - before).toBe(2);
    // While the task waits for its second review, an identical one must not take the rejected answer.
    await create(sglangTask('review-copy', prompt, { review: { required: true } }));
    await eventually(async () =>
      expect(condition(await taskStatus('review-copy'), 'Progressing')).toMatchObject({
        reason: 'WaitingForInFlight',
      }),
    );
    await patchReview('review-rework', { required: true, decision: 'Accepted', feedback: 'Mention GPUs.' });
    const accepted = await waitForPhase('review-rework', 'Succeeded');
    const copy = await waitForPhase('review-copy', 'Reused');
    expect(copy.reusedFrom?.name).toBe('review-rework');
    expect(copy.result?.sha256).toBe(accepted.attempts?.[1]?.resultSha256);
    expect(generated() - before).toBe(2);
  });
  it('holds a task back while a live identical task holds the generation lease, then lets it generate', async () => {
    const prompt = 'Explain the generation lease.';
    // A failed probe publishes the fingerprint (the input cap is not part of it) and leaves its Lease behind.
    await create(sglangTask('lease-probe', prompt, { budget: { maxInputTokens: 1 } }));
    const probe = await waitForPhase('lease-probe', 'Failed');
    const lease = `task-${(probe.fingerprint ?? '').replace(/^sha256:/, '').slice(0, 40)}`;
    const held = await getJson<{
      metadata: { ownerReferences?: { uid: string }[] };
      spec: { holderIdentity: string };
    }>('leases.coordination.k8s.io', lease);
    expect(held.spec.holderIdentity).toBe('lease-probe');
    // Hand the Lease to a live task (waiting for review), as if it were generating this very fingerprint.
    await create(sglangTask('lease-holder', 'Another prompt entirely.', { review: { required: true } }));
    await waitForPhase('lease-holder', 'AwaitingReview');
    const holder = await getJson<{ metadata: { uid: string } }>(TASKS, 'lease-holder');
    const ref = {
      apiVersion: 'cacheroute.dev/v1alpha1',
      kind: 'Task',
      name: 'lease-holder',
      uid: holder.metadata.uid,
    };
    await k([
      'patch',
      'leases.coordination.k8s.io',
      lease,
      '--type',
      'merge',
      '-p',
      JSON.stringify({ metadata: { ownerReferences: [ref] }, spec: { holderIdentity: 'lease-holder' } }),
    ]);
    const before = generated();
    await create(sglangTask('lease-blocked', prompt));
    await eventually(() =>
      expect(
        operatorLog.some(
          (l) => l.includes(`${NS}/lease-blocked`) && l.includes('holds the generation lease'),
        ),
      ).toBe(true),
    );
    expect((await taskStatus('lease-blocked')).phase).toBe('Pending');
    expect(generated()).toBe(before);
    // The holder finishes: its Lease may be taken over, and the blocked task generates.
    await patchReview('lease-holder', { required: true, decision: 'Accepted' });
    await waitForPhase('lease-blocked', 'Succeeded');
    expect(generated() - before).toBe(1);
    const taken = await getJson<{ spec: { holderIdentity: string } }>('leases.coordination.k8s.io', lease);
    expect(taken.spec.holderIdentity).toBe('lease-blocked');
  });
});

describe('task on OpenRouter (local fixture)', () => {
  const key = FIXTURE_API_KEY;

  it('succeeds with one pinned request, the key only in Authorization, and the usage and cost', async () => {
    fx.script('success');
    const sent = fx.requests.length;
    await create(
      buildOpenRouterTaskManifest({
        name: 'or-success',
        prompt: 'Say hello.',
        secret: SECRET,
        cacheWriteUsage: 'required',
      }),
    );
    const s = await waitForPhase('or-success', 'Succeeded');
    expect(s.usage).toEqual({
      promptTokens: 12,
      completionTokens: 4,
      cachedTokens: 8,
      cacheWriteTokens: 2,
      newGeneration: true,
    });
    expect(s.cost).toMatch(/^0\.0000\d+$/);
    expect(s.result?.inline).toBe('Hello from the fixture.');
    expect(s.runtimeIdentity).toMatchObject({
      provider: 'openrouter',
      upstreamProvider: 'openai',
      servedBy: 'OpenAI',
    });
    expect(fx.requests.length - sent).toBe(1);
    const req = fx.requests.at(-1);
    expect(req?.headers.authorization).toBe(`Bearer ${key}`);
    expect(req?.rawBody).not.toContain(key);
    expect(req?.body).toMatchObject({
      model: 'openai/gpt-4.1-mini',
      stream: false,
      provider: { only: ['openai'], order: ['openai'], allow_fallbacks: false, require_parameters: true },
    });
  });

  it.each<[string, Scenario, 'required' | 'not_applicable', string, string]>([
    ['unknown usage', 'unknown-usage', 'not_applicable', 'UsageUnknown', 'UsageMissing'],
    ['contradictory counters', 'contradictory-counters', 'required', 'UsageUnknown', 'CountersContradictory'],
    [
      'provider mismatch in the response',
      'provider-mismatch',
      'required',
      'ProviderMismatch',
      'ProviderMismatch',
    ],
    [
      'missing write counter under required',
      'missing-write-counter',
      'required',
      'UsageUnknown',
      'CounterMissing',
    ],
    [
      'an error body quoting the key',
      { status: 402, body: { error: { message: `key ${FIXTURE_API_KEY} has no credit` } } },
      'required',
      'ProviderError',
      'HTTP402',
    ],
  ])(
    'fails closed on %s after exactly one request',
    async (title, scenario, cacheWriteUsage, reason, code) => {
      fx.script(scenario);
      const sent = fx.requests.length;
      const name = `or-${title.replaceAll(' ', '-')}`;
      await create(
        buildOpenRouterTaskManifest({
          name,
          prompt: `Say hello (${title}).`,
          secret: SECRET,
          cacheWriteUsage,
        }),
      );
      const s = await waitForPhase(name, 'Failed');
      expect(condition(s, 'Failed')).toMatchObject({ reason, message: expect.stringContaining(code) });
      expect(s.result).toBeUndefined();
      expect(s.attempts).toHaveLength(1);
      expect(s.attempts?.[0]).toMatchObject({ outcome: reason });
      expect(fx.requests.length - sent).toBe(1);
    },
  );

  it("refuses a paid task past the namespace's daily cap before any request, and books the others", async () => {
    const sent = fx.requests.length;
    await create(
      buildOpenRouterTaskManifest({
        name: 'or-over-daily-cap',
        prompt: 'Say hello (dear).',
        secret: SECRET,
        // 2,048 reserved input tokens at 20 per million: 0.041, past the suite's cap of 0.02.
        spec: {
          budget: {
            maxInputTokens: 4096,
            prices: { inputPerMillion: '20', outputPerMillion: '20' },
            maxCost: '1',
          },
        },
      }),
    );
    const s = await waitForPhase('or-over-daily-cap', 'Failed');
    expect(condition(s, 'Failed')).toMatchObject({
      reason: 'DailyCapReached',
      message: expect.stringContaining('of its daily cap of 0.02 USD on paid calls today (UTC)'),
    });
    expect(fx.requests.length - sent).toBe(0);
    // The ledger outlives the operator: the earlier paid tasks' cost (and kept reservations) is booked.
    const ledger = JSON.parse(await k(['get', 'configmap', LEDGER_CONFIGMAP, '-o', 'json'])) as {
      data: Record<string, string>;
    };
    const today = ledger.data[computeLedgerKey(new Date(), 'USD')] ?? '0';
    expect(parseDecimal(today)).toBeGreaterThan(0n);
    expect(parseDecimal(today)).toBeLessThanOrEqual(parseDecimal('0.02'));
  });

  it('keeps the API key out of every status, event and log line', async () => {
    const tasks = await k(['get', TASKS, '-o', 'json']);
    const evts = await k(['get', 'events.events.k8s.io', '-o', 'json']);
    expect(tasks).toContain('or-success');
    expect(tasks).not.toContain(key);
    expect(evts).toContain('ProviderError');
    expect(evts).not.toContain(key);
    expect(operatorLog.length).toBeGreaterThan(0);
    expect(operatorLog.filter((l) => l.includes(key))).toEqual([]);
  });
});

describe('task reuse across identities', () => {
  it('does not reuse under another cache salt (the CachePolicy moved to another cache namespace)', async () => {
    const old = await taskStatus('first');
    await k([
      'patch',
      'cachepolicies.cacheroute.dev',
      POLICY,
      '--type',
      'merge',
      '-p',
      '{"spec":{"cacheNamespace":"team-b"}}',
    ]);
    const salt = await eventually(async () => {
      const s = await policySalt('llama-3-1-8b-instruct-r1');
      expect(s).not.toBe(old.runtimeIdentity?.['cacheSalt']);
      return s;
    });
    const before = generated();
    await create(sglangTask('other-salt', FIRST_PROMPT));
    const s = await waitForPhase('other-salt', 'Succeeded');
    expect(s.reusedFrom).toBeUndefined();
    expect(s.fingerprint).not.toBe(old.fingerprint);
    expect(s.runtimeIdentity?.['cacheSalt']).toBe(salt);
    // The runtime's KV is keyed by salt too: the old salt's prefix is not met.
    expect(s.usage).toMatchObject({ newGeneration: true, cachedTokens: 0 });
    expect(generated() - before).toBe(1);
  });

  it('does not reuse after the Deployment changed its deploymentId', async () => {
    const old = await taskStatus('other-salt');
    const m = buildDeploymentManifest({ name: DEPLOYMENT, replicas: 1 });
    m.spec['deploymentId'] = 'llama-3-1-8b-instruct-r2';
    await k(['apply', '-f', '-'], JSON.stringify(m));
    await waitForRoutable('llama-3-1-8b-instruct-r2');
    // deploymentId is not in the fingerprint, so the old pod stays listed (and verified) until the
    // rollout that relabels the pods has replaced it: wait for an endpoint on a pod of the new id.
    const pod = await eventually(
      async () => {
        const name = (await deploymentStatus()).endpoints?.[0]?.pod ?? '';
        const id = await k([
          'get',
          'pod',
          name,
          '-o',
          'jsonpath={.metadata.labels.cacheroute\\.dev/deployment-id}',
        ]);
        expect(id).toBe('llama-3-1-8b-instruct-r2');
        expect(kubelet.sims.has(name)).toBe(true);
        return name;
      },
      { timeoutMs: 90_000 },
    );
    await policySalt('llama-3-1-8b-instruct-r2');
    // The rollout replaced the pod: count on the new pod's simulator alone.
    const requests = () => kubelet.sims.get(pod)?.server.engine.counters.requests ?? -1;
    const before = requests();
    await create(sglangTask('other-id', FIRST_PROMPT));
    const s = await waitForPhase('other-id', 'Succeeded');
    expect(s.reusedFrom).toBeUndefined();
    expect(s.fingerprint).not.toBe(old.fingerprint);
    expect(s.runtimeIdentity).toMatchObject({ deploymentId: 'llama-3-1-8b-instruct-r2' });
    expect(before).toBeGreaterThanOrEqual(0);
    expect(requests() - before).toBe(1);
  });
});
