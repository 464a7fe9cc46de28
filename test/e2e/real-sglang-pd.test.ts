// real-sglang PD: a prefill/decode Deployment on the REAL SGLang 0.5.23 pair, not
// the simulator. The sim-kubelet starts the pods' own rendered arguments through
// `kit serve` (CPU, the tiny Llama): SGLang's bootstrap server on the prefill,
// Mooncake's transfer engine over TCP (`mooncake_tcp`, no RDMA) between them.
// The operator verifies both parts from what they report; the gateway pairs them
// (bootstrap host/port/room to both, the decode's answer to the client); the
// operator's warm-up goes through the pair. Two real servers: this machine's most
// (test/support/real-sglang.ts), so this file has its own control plane.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CachePolicyStatus, DeploymentStatus, Endpoint } from '#api';
import { MODEL_DIR } from '../../operator/src/controllers/deployment/model-cache/names.ts';
import { startOperator, type Operator } from '../../operator/src/operator.ts';
import { createLogger } from '#kube/logger.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { startInProcessGateway, testKeysSecret, type InProcessGateway } from '../support/gateway.ts';
import { eventually, kubectlOk } from '../support/kubectl.ts';
import { REPO_ROOT } from '../support/samples.ts';
import { removeKitModelLink } from '../support/real-sglang.ts';
import { postJson } from '../support/sim/testing.ts';
import { parseRuntimeMetrics } from '../../gateway/src/endpoints/runtime-load.ts';
import { readMetricSamples } from '#sglang/metrics-text.ts';
import { realRuntimeAuth, startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';

const NS = 'e2e-real-sglang-pd';
const NAME = 'tiny-pd';
const SERVED = 'tiny-pd-chat';
// The tiny model's tokenizer was trained on this sentence: about ten tokens a copy.
const SENTENCE = 'the quick brown fox jumps over the lazy dog ';
// What the CachePolicy warms: a system message of about 300 tokens.
const HANDBOOK = `The handbook. ${SENTENCE.repeat(30)}`;

let cp: ControlPlane;
let kubelet: SimKubelet;
let operator: Operator;
let gateway: InProcessGateway;
let linkedModelDir = false;

const k = (args: string[], input?: string) =>
  kubectlOk(['-n', NS, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });
const status = async (): Promise<DeploymentStatus> =>
  (JSON.parse(await k(['get', 'sgd', NAME, '-o', 'json'])) as { status?: DeploymentStatus }).status ?? {};

/** The dense sample as one prefill and one decode part, over Mooncake's TCP transport. */
function pdDeployment() {
  const m = buildDeploymentManifest({ name: NAME, gpus: 1 });
  delete m.spec['replicas'];
  delete m.spec['profile'];
  m.spec['deploymentId'] = `${NAME}-r1`;
  m.spec['model'] = { ...(m.spec['model'] as object), servedName: SERVED };
  m.spec['disaggregation'] = {
    transferBackend: 'mooncake_tcp',
    prefill: { replicas: 1 },
    decode: { replicas: 1 },
  };
  return m;
}

type Usage = { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };

/** A streamed chat through the gateway: the status, the content type and the SSE events' data. */
async function streamChat(
  messages: { role: string; content: string }[],
  extra: Record<string, unknown> = {},
): Promise<{ status: number; contentType: string; events: string[] }> {
  const r = await gateway.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    payload: { model: SERVED, messages, max_tokens: 4, temperature: 0, stream: true, ...extra },
  });
  const events = r.body
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => line.slice('data: '.length));
  return { status: r.statusCode, contentType: String(r.headers['content-type']), events };
}

type Chunk = { object: string; choices: { delta: { content?: string } }[]; usage?: Usage | null };

async function chat(messages: { role: string; content: string }[]): Promise<Usage> {
  const r = await gateway.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    payload: { model: SERVED, messages, max_tokens: 4, temperature: 0 },
  });
  expect(r.statusCode, r.body).toBe(200);
  return r.json<{ usage: Usage }>().usage;
}

beforeAll(async () => {
  linkedModelDir = !existsSync(MODEL_DIR);
  cp = await startControlPlane({ full: true, gpuNodes: 1 });
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  kubelet = await startSimKubelet({
    kubeconfig: cp.kubeconfig,
    realSglang: (pod) => (pod.metadata?.labels?.['cacheroute.dev/deployment'] === NAME ? [] : undefined),
    log: (line) => console.info(`[sim-kubelet] ${line}`),
  });
  operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({ level: 'warn', fields: { component: 'operator' } }),
    leaderElection: false,
    http: false,
    // The runtimes' API keys reach the gateway through the one Secret the operator keeps (ADR 0027).
    gatewayKeysSecret: testKeysSecret(NS),
  });
  gateway = await startInProcessGateway(cp.kubeconfig, [NS]);
});

afterAll(async () => {
  await gateway?.stop();
  await operator?.stop();
  await kubelet?.stop();
  await cp?.stop();
  // `kit serve` links the declared model path to the tiny model when nothing is there.
  if (linkedModelDir) removeKitModelLink(MODEL_DIR);
});

describe('real-sglang PD', () => {
  // Two real servers start one after the other: 40-90 s each on this machine, more under load.
  it(
    'the operator verifies a real prefill and a real decode server, and pairs them',
    { timeout: 600_000 },
    async () => {
      await k(['apply', '-f', '-'], JSON.stringify(pdDeployment()));
      // Result reuse off: every request here must reach the pair and report its own cache.
      await k(
        ['apply', '-f', '-'],
        JSON.stringify(buildCachePolicyManifest('team-a', [NAME], { resultReuse: { enabled: false } })),
      );
      const s = await eventually(
        async () => {
          const s = await status();
          expect(s.endpoints?.filter((e) => e.verified)).toHaveLength(2);
          return s;
        },
        { timeoutMs: 420_000, intervalMs: 1_000 },
      );
      expect(s.routable).toMatchObject({ value: true, reason: 'PrefillDecodePaired' });
      const byRole = (role: string): Endpoint | undefined => s.endpoints?.find((e) => e.role === role);
      expect(byRole('prefill')).toMatchObject({
        bootstrapPort: 8998,
        reported: {
          modelPath: MODEL_DIR,
          servedModelName: SERVED,
          disaggregationMode: 'prefill',
          radixCache: true,
        },
      });
      // SGLang turns a decode server's radix cache off unless asked.
      expect(byRole('decode')).toMatchObject({
        reported: {
          modelPath: MODEL_DIR,
          servedModelName: SERVED,
          disaggregationMode: 'decode',
          radixCache: false,
        },
      });
      // Both are the real server, started from their pods' arguments; the kubelet records each
      // once it answers /health, which can be after the operator verified it (realReady).
      await Promise.all((s.endpoints ?? []).map((e) => kubelet.realReady(e.pod)));
      expect(kubelet.reals.size).toBe(2);
    },
  );

  it('a chat is answered through the real pair, and a repeat reports the prefill cache', async () => {
    const prompt = [{ role: 'user', content: `A pair chapter. ${SENTENCE.repeat(40)}` }];
    const first = await eventually(() => chat(prompt), { timeoutMs: 60_000, intervalMs: 1_000 });
    expect(first.prompt_tokens).toBeGreaterThan(300);
    // The decode has no radix cache: the cached tokens in its answer are the prefill's, whose
    // KV came over Mooncake's TCP transport. Page size 16: whole pages of the prompt.
    const again = await chat(prompt);
    expect(again.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(first.prompt_tokens - 16);
    expect(again.prompt_tokens_details.cached_tokens).toBeLessThan(first.prompt_tokens);
  });

  it('the decode refuses a request with no bootstrap room, as the prefill does', async () => {
    const s = await status();
    for (const role of ['prefill', 'decode']) {
      const e = s.endpoints?.find((x) => x.role === role);
      if (!e) throw new Error(`no ${role} endpoint`);
      const r = await fetch(`http://${e.ip}:${e.port}/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await realRuntimeAuth(kubelet, e.pod)) },
        body: JSON.stringify({ text: 'no room', sampling_params: { max_new_tokens: 1 } }),
      });
      expect(r.status, role).toBe(400);
      expect(await r.text()).toContain('without bootstrap room id');
    }
  });

  it('a streamed chat is answered through the real pair, the decode streaming it', async () => {
    const prompt = [{ role: 'user', content: `A streamed chapter. ${SENTENCE.repeat(40)}` }];
    // The client asks for no usage: the gateway asks the pair for it (its cache report) and takes
    // the usage event out of the decode's stream; the prefill's streamed answer is read whole.
    const first = await streamChat(prompt);
    expect(first.status, first.events.join('\n')).toBe(200);
    expect(first.contentType).toContain('text/event-stream');
    expect(first.events.at(-1)).toBe('[DONE]');
    const chunks = first.events.slice(0, -1).map((e) => JSON.parse(e) as Chunk);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).not.toBe('');
    expect(chunks.some((c) => c.usage)).toBe(false);
    // Asked for: the decode's usage event reaches the client, with the prefill's cached tokens
    // (its KV came over Mooncake's TCP transport; the decode has no radix cache).
    const again = await streamChat(prompt, { stream_options: { include_usage: true } });
    expect(again.status).toBe(200);
    const usage = again.events
      .slice(0, -1)
      .map((e) => JSON.parse(e) as Chunk)
      .find((c) => c.usage)?.usage;
    expect(usage?.prompt_tokens).toBeGreaterThan(300);
    expect(usage?.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(
      (usage?.prompt_tokens ?? 0) - 16,
    );
  });

  it('each part reports the PD queue the gateway adds to its load', async () => {
    // The gateway scrapes every endpoint's /metrics (runtime-load.ts): a prefill's waiting room
    // is its bootstrap queue, a decode's its prealloc queue. SGLang sets these gauges when its
    // scheduler logs stats: a prefill after every prefill batch, a decode every
    // decode_log_interval (40) decode steps or after 30 s idle; before that the decode's
    // /metrics lacks the name (the simulator's has it at 0 from the start). So one answer of
    // more than 40 decode steps first: the decode's first token is the prefill's.
    const long = await gateway.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      payload: {
        model: SERVED,
        messages: [{ role: 'user', content: 'Count slowly.' }],
        max_tokens: 48,
        temperature: 0,
        ignore_eos: true,
      },
    });
    expect(long.statusCode, long.body).toBe(200);
    expect(long.json<{ usage: { completion_tokens: number } }>().usage.completion_tokens).toBe(48);
    const s = await status();
    const wanted = {
      prefill: 'sglang:num_prefill_bootstrap_queue_reqs',
      decode: 'sglang:num_decode_prealloc_queue_reqs',
    } as const;
    for (const role of ['prefill', 'decode'] as const) {
      const e = s.endpoints?.find((x) => x.role === role);
      const text = await (await fetch(`http://${e?.ip ?? ''}:${e?.port ?? 0}/metrics`)).text();
      const names = readMetricSamples(text, (n) => n.startsWith('sglang:')).map((m) => m.name);
      expect(names, role).toContain(wanted[role]);
      // Idle again: nothing waits, and the gateway reads a load from the part's own text.
      expect(parseRuntimeMetrics(text), role).toMatchObject({ queued: 0 });
    }
  });

  it('warm-up goes through the pair: the first chat with the document reports it cached', async () => {
    await k(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'shared-knowledge' },
        data: { 'handbook.md': HANDBOOK },
      }),
    );
    const policy = buildCachePolicyManifest('team-a', [NAME], {
      resultReuse: { enabled: false },
      warmup: { documents: [{ name: 'shared-knowledge', key: 'handbook.md' }] },
    });
    await k(['apply', '-f', '-'], JSON.stringify(policy));
    const prefill = (await status()).endpoints?.find((e) => e.role === 'prefill');
    if (!prefill) throw new Error('no prefill endpoint');
    await eventually(
      async () => {
        const p = JSON.parse(await k(['get', 'cachepolicies.cacheroute.dev', 'team-a', '-o', 'json'])) as {
          status?: CachePolicyStatus;
        };
        expect(p.status?.targets?.[0]?.warmup).toEqual([
          expect.objectContaining({ pod: prefill.pod, state: 'Warmed' }),
        ]);
      },
      { timeoutMs: 120_000, intervalMs: 1_000 },
    );
    // What the warm-up prefilled, as the real prefill counts it (its own template and tokenizer).
    const rendered = await postJson(
      `http://${prefill.ip}:${prefill.port}/tokenize`,
      { messages: [{ role: 'system', content: HANDBOOK }] },
      await realRuntimeAuth(kubelet, prefill.pod),
    );
    const count = (rendered.json as { count: number }).count;
    const usage = await chat([
      { role: 'system', content: HANDBOOK },
      { role: 'user', content: 'Which part holds my prefix?' },
    ]);
    // The whole system message but the warm-up's generation cue, in whole pages of 16.
    expect(usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(count - 16);
  });
});
