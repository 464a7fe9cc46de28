// real-sglang knowledge delivery (issue 33 item 4, ADR 0042): a CachePolicy's warm-up document
// is prefilled ONCE into a HiCache Deployment's shared L3 tier (the file backend on an
// operator-made ReadWriteMany claim, ADR 0029), on the REAL SGLang 0.5.23. Every other replica,
// one scaled up later and one that replaces a deleted pod, is never prefilled: the operator
// checks it renders the document as delivered and marks it warmed from storage, and the first
// request that carries the document reports its tokens cached, from storage. From what each
// real server reports of itself (/metrics, meta_info.cached_tokens_details):
// - the warm-up sent the document once for the Deployment (sglang:prompt_tokens_total, and the
//   operator's cacheroute_warmup_documents_total);
// - the later replica's first request with the document: its tokens cached, tier storage;
// - another tenant's salt gets nothing of it.
// SGLang's own prefetch policy is left at its default (timeout): the check below is what a
// Deployment gets without tuning. At most two real servers at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CachePolicyStatus, Endpoint } from '#api';
import { WARMUP_DOCUMENTS_METRIC } from '../../operator/src/controllers/cachepolicy/warmup-metrics.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import type { E2eStack } from '../support/e2e-stack.ts';
import { eventually } from '../support/kubectl.ts';
import {
  provideSharedVolume,
  runtimeAuthOf,
  startRealL3Stack,
  verifiedEndpoints as verifiedOf,
  type SharedVolume,
} from '../support/real-sglang-l3.ts';

const NS = 'e2e-real-sglang-knowledge';
const NAME = 'tiny-kdn';
const CLASS = 'l3-shared';
const PAGE = 16;
// The tiny model's tokenizer was trained on this sentence: about ten tokens a copy.
const SENTENCE = 'the quick brown fox jumps over the lazy dog ';
const HANDBOOK = `The handbook. ${SENTENCE.repeat(40)}`;
const QUESTION = 'What does the handbook say about the fox?';

let stack: E2eStack;
let volume: SharedVolume | undefined;

interface MetaInfo {
  prompt_tokens: number;
  cached_tokens: number;
  cached_tokens_details: { device: number; host: number; storage?: number } | null;
}

const verifiedEndpoints = (count: number): Promise<Endpoint[]> => verifiedOf(stack, NAME, count);

async function post<T>(e: Endpoint, path: string, body: unknown): Promise<T> {
  const r = await fetch(`http://${e.ip}:${e.port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(await runtimeAuthOf(stack, e)) },
    body: JSON.stringify(body),
  });
  expect(r.status).toBe(200);
  return (await r.json()) as T;
}

const system = (text: string) => ({ role: 'system', content: text });

/** The token ids SGLang renders chat messages to (its /tokenize renders as for a chat completion). */
async function render(e: Endpoint, messages: unknown[]): Promise<number[]> {
  return (await post<{ tokens: number[] }>(e, '/tokenize', { messages })).tokens;
}

/** A user's chat that starts with the document, as the runtime renders it, sent under `salt`. */
async function ask(e: Endpoint, salt: string): Promise<MetaInfo> {
  const ids = await render(e, [system(HANDBOOK), { role: 'user', content: QUESTION }]);
  const r = await post<{ meta_info: MetaInfo }>(e, '/generate', {
    input_ids: ids,
    sampling_params: { max_new_tokens: 1, temperature: 0 },
    cache_salt: salt,
  });
  return r.meta_info;
}

/** A counter of a runtime's own /metrics, its series summed. */
async function runtimeCounter(e: Endpoint, name: string): Promise<number> {
  const r = await fetch(`http://${e.ip}:${e.port}/metrics`);
  const text = await r.text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .reduce((a, l) => a + Number(l.split(' ').at(-1)), 0);
}

/** Prompt tokens a runtime took in (SGLang's own startup request included), by its /metrics. */
const promptTokens = (e: Endpoint) => runtimeCounter(e, 'sglang:prompt_tokens_total');

/** The operator's own count of warm-up documents, by source (cacheroute_warmup_documents_total). */
async function warmupDocuments(): Promise<Record<string, number>> {
  const metric = stack.operator.manager.metrics.registry.getSingleMetric(WARMUP_DOCUMENTS_METRIC);
  const values = (await metric?.get())?.values ?? [];
  return Object.fromEntries(values.map((v) => [String(v.labels['source']), v.value]));
}

async function policyStatus(): Promise<CachePolicyStatus> {
  const p = JSON.parse(await stack.k(['get', 'cachepolicies.cacheroute.dev', 'kdn', '-o', 'json'])) as {
    status?: CachePolicyStatus;
  };
  return p.status ?? {};
}

/** The policy's warm-up entry of a pod, once Warmed. */
async function warmedEntry(pod: string) {
  return eventually(
    async () => {
      const entry = (await policyStatus()).targets?.[0]?.warmup?.find((w) => w.pod === pod);
      expect(entry?.state).toBe('Warmed');
      return entry;
    },
    { timeoutMs: 120_000, intervalMs: 1_000 },
  );
}

beforeAll(async () => {
  stack = await startRealL3Stack(NS, NAME, ['persistentvolume-binder', 'pvc-protection']);
  volume = await provideSharedVolume(stack, `${NS}-l3`, CLASS);
});

afterAll(async () => {
  await stack?.stop();
  volume?.remove();
});

describe('real-sglang knowledge delivery (warm-up once into the shared L3 tier)', () => {
  it('prefills the document once; later replicas answer its first request from storage', async () => {
    const m = buildDeploymentManifest({
      name: NAME,
      replicas: 1,
      gpus: 1,
      spec: {
        deploymentId: `${NAME}-r1`,
        profile: 'hicache',
        hicache: {
          ratio: 2,
          writePolicy: 'write_through',
          storage: { backend: 'file', volume: { size: '1Gi', storageClassName: CLASS } },
        },
        serving: { pageSize: PAGE, maxTotalTokens: 2048 },
      },
    });
    (m.spec['model'] as Record<string, unknown>)['servedName'] = NAME;
    await stack.k(['apply', '-f', '-'], JSON.stringify(m));
    await eventually(
      async () =>
        expect((await stack.status(NAME)).l3?.[0]).toMatchObject({ backend: 'file', reachable: true }),
      { timeoutMs: 60_000 },
    );
    const [a] = await verifiedEndpoints(1);
    if (!a) throw new Error('one replica');

    await stack.k(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'knowledge' },
        data: { 'handbook.md': HANDBOOK },
      }),
    );
    await stack.k(
      ['apply', '-f', '-'],
      JSON.stringify(
        buildCachePolicyManifest('kdn', [NAME], {
          warmup: { documents: [{ name: 'knowledge', key: 'handbook.md' }], routeAfterSeconds: 600 },
        }),
      ),
    );

    // A delivers: prefilled once, and the tier confirmed it (its backup counter grew).
    const onA = await warmedEntry(a.pod);
    expect(onA).toMatchObject({ source: 'prefill' });
    const target = (await policyStatus()).targets?.[0];
    const salt = target?.cacheSalt ?? '';
    expect(salt).not.toBe('');
    const warmupPrompt = await render(a, [system(HANDBOOK)]);
    expect(target?.delivered).toEqual([
      expect.objectContaining({
        role: 'standalone',
        pod: a.pod,
        cacheSalt: salt,
        tokens: warmupPrompt.length,
      }),
    ]);
    expect(target?.delivered?.[0]?.storedTokens).toBeGreaterThanOrEqual(
      Math.floor((warmupPrompt.length - 1) / PAGE) * PAGE,
    );
    // Prefilled once: the document's tokens once, not twice (SGLang's startup request is a few tokens).
    const onceOnA = await promptTokens(a);
    expect(onceOnA).toBeGreaterThanOrEqual(warmupPrompt.length);
    expect(onceOnA).toBeLessThan(2 * warmupPrompt.length);
    expect(await warmupDocuments()).toEqual({ prefill: 1 });

    // A replica scaled up later: never prefilled, warmed from storage.
    await stack.k(['patch', 'sgd', NAME, '--type=merge', '-p', JSON.stringify({ spec: { replicas: 2 } })]);
    const b = (await verifiedEndpoints(2)).find((e) => e.pod !== a.pod);
    if (!b) throw new Error('no new replica');
    expect(await warmedEntry(b.pod)).toMatchObject({ source: 'storage' });
    expect(await promptTokens(b)).toBeLessThan(warmupPrompt.length / 4);
    expect(await promptTokens(a)).toBe(onceOnA);
    expect(await warmupDocuments()).toEqual({ prefill: 1, storage: 1 });

    // Its first request with the document: the document's pages come from L3, none computed.
    const asked = await render(b, [system(HANDBOOK), { role: 'user', content: QUESTION }]);
    let shared = 0;
    while (shared < warmupPrompt.length && asked[shared] === warmupPrompt[shared]) shared++;
    const fromStorage = Math.floor(Math.min(shared, warmupPrompt.length - 1) / PAGE) * PAGE;
    expect(fromStorage).toBeGreaterThanOrEqual(HANDBOOK.length / 10);
    const first = await ask(b, salt);
    expect(first.cached_tokens_details).toMatchObject({ device: 0, host: 0, storage: fromStorage });

    // Another tenant's salt: nothing of the document is theirs, in L3 either.
    const other = await ask(b, `${salt}-other`);
    expect(other.cached_tokens).toBe(0);

    // One replica goes, a fresh one comes (empty device and host): it loads from L3 too.
    await stack.k(['patch', 'sgd', NAME, '--type=merge', '-p', JSON.stringify({ spec: { replicas: 1 } })]);
    const [kept] = await verifiedEndpoints(1);
    await eventually(() => expect(stack.kubelet.reals.size).toBe(1), { timeoutMs: 60_000 });
    await stack.k(['patch', 'sgd', NAME, '--type=merge', '-p', JSON.stringify({ spec: { replicas: 2 } })]);
    const fresh = (await verifiedEndpoints(2)).find((e) => e.pod !== kept?.pod);
    if (!fresh) throw new Error('no fresh replica');
    expect([a.pod, b.pod]).not.toContain(fresh.pod);
    expect(await warmedEntry(fresh.pod)).toMatchObject({ source: 'storage' });
    expect(await promptTokens(fresh)).toBeLessThan(warmupPrompt.length / 4);
    // The same question: the document from the delivery, and what B's first request wrote through
    // after it (the question's pages), all from L3; the last page is always computed.
    const again = await ask(fresh, salt);
    expect(again.cached_tokens_details).toMatchObject({ device: 0, host: 0 });
    expect(again.cached_tokens_details?.storage).toBeGreaterThanOrEqual(fromStorage);
    expect(again.cached_tokens).toBe(Math.floor((asked.length - 1) / PAGE) * PAGE);
    // Still delivered once, by A: one prefill for the Deployment, every other replica from storage.
    expect((await policyStatus()).targets?.[0]?.delivered).toEqual([expect.objectContaining({ pod: a.pod })]);
    expect(await warmupDocuments()).toEqual({ prefill: 1, storage: 2 });
    // Three real server starts, one after the other: each has its own bound (verifiedEndpoints,
    // the kit's start), which the suite's 300 s default is not.
  }, 1_200_000);
});
