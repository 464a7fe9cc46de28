// The I/O of one warm-up: each document as a chat completion (warmup.ts says
// why), in order, to a standalone endpoint as is, or to a prefill endpoint and
// its decode partner at once with the prefill's bootstrap address and a fresh
// room per document, as SGLang's prefill/decode clients send it.
//
// Before any prefill, each document is rendered by the runtime (render.ts):
// its rendering's digest is what an L3 delivery records, and a template that
// writes the date comes back as a warning. With a shared L3 tier (ADR 0042):
// - a target given the delivered digest that renders the same is not
//   prefilled at all: its runtime loads the documents from L3 on first use;
// - a delivering target is prefilled, then waits until its runtime says the
//   tier holds the documents: its sglang:backuped_tokens_total (host to L3)
//   grew by the documents' whole pages, less what the warm-up found cached.
import { computeBootstrapRoom, toRandom32 } from '#sglang/bootstrap.ts';
import { readMetricSamples } from '#sglang/metrics-text.ts';
import { fetchMetricsText, type ClientOptions } from '../../sglang-client/client.ts';
import { postChatCompletion, type ChatCompletionResponse } from '../../sglang-client/generate.ts';
import { checkDateVariance, digestRenderings, renderDocument } from './render.ts';
import { buildWarmupRequest, type WarmupTarget } from './warmup.ts';

/** SGLang 0.5.23's host-to-storage backup counter (observability/metrics_collector.py StorageMetricsCollector). */
export const BACKUPED_TOKENS_METRIC = 'sglang:backuped_tokens_total';

export interface WarmupSendOptions {
  /** Bound of one document's request. */
  timeoutMs: number;
  signal: AbortSignal;
  /** The runtime's API key for the target's fingerprint. */
  apiKey: string | undefined;
  random?: () => number;
  /** Longest wait for the L3 tier to hold a delivery (default 30 s). */
  storeTimeoutMs?: number;
  /** Between two reads of the backup counter (default 250 ms). */
  storePollMs?: number;
  /** Document names, for warnings (default "warmup.documents[N]"). */
  names?: readonly string[];
}

export type WarmupOutcome =
  | { ok: false; error: string }
  | {
      ok: true;
      /** prefill: the documents were computed here; storage: they render as delivered, L3 holds them. */
      source: 'prefill' | 'storage';
      rendered: string;
      /** Prompt tokens of the warm-up requests (0 when nothing was sent). */
      tokens: number;
      /** Tokens the L3 tier confirmed (a delivery only). */
      storedTokens: number;
      warnings: string[];
    };

const fail = (error: string): WarmupOutcome => ({ ok: false, error });

/** The tokens of a prompt SGLang stores: whole pages, the last token always computed. */
export const cacheableTokens = (promptTokens: number, pageSize: number): number =>
  Math.floor(Math.max(0, promptTokens - 1) / pageSize) * pageSize;

async function readBackedUp(url: string, opts: ClientOptions): Promise<number | undefined> {
  const r = await fetchMetricsText(url, opts);
  if (!r.ok) return undefined;
  const samples = readMetricSamples(r.value, (n) => n === BACKUPED_TOKENS_METRIC);
  return samples.reduce((a, s) => a + s.value, 0);
}

async function prefillOne(
  target: WarmupTarget,
  document: string,
  post: ClientOptions,
  random: () => number,
): Promise<{ ok: true; usage: ChatCompletionResponse['usage'] } | { ok: false; error: string }> {
  const pair = target.pair;
  if (!pair) {
    const r = await postChatCompletion(
      target.url,
      { ...buildWarmupRequest(target, document, undefined) },
      post,
    );
    return r.ok ? { ok: true, usage: r.value.usage } : r;
  }
  const body = { ...buildWarmupRequest(target, document, computeBootstrapRoom(random)) };
  const [prefill, decode] = await Promise.all([
    postChatCompletion(target.url, body, post),
    postChatCompletion(pair.decodeUrl, body, post),
  ]);
  if (!prefill.ok) return prefill;
  if (!decode.ok) return { ok: false, error: `decode ${pair.decodePod}: ${decode.error}` };
  return { ok: true, usage: prefill.value.usage };
}

async function waitForStore(
  target: WarmupTarget,
  before: number,
  wanted: number,
  opts: WarmupSendOptions,
  post: ClientOptions,
): Promise<{ ok: true; stored: number } | { ok: false; error: string }> {
  const deadline = Date.now() + (opts.storeTimeoutMs ?? 30_000);
  let stored = 0;
  for (;;) {
    const now = await readBackedUp(target.url, post);
    if (now !== undefined) stored = now - before;
    if (stored >= wanted) return { ok: true, stored };
    if (opts.signal.aborted) return { ok: false, error: 'cancelled' };
    if (Date.now() >= deadline)
      return {
        ok: false,
        error:
          `the L3 tier did not confirm the documents: ${target.pod} backed up ${stored} of ${wanted} tokens ` +
          `(${BACKUPED_TOKENS_METRIC}); is its write policy write_through and the tier writable?`,
      };
    await new Promise((r) => setTimeout(r, opts.storePollMs ?? 250));
  }
}

interface Renderings {
  rendered: string;
  warnings: string[];
}

/** Each document as the runtime renders it (digested together), and the template's variable parts. */
async function renderAll(
  target: WarmupTarget,
  documents: readonly string[],
  opts: WarmupSendOptions,
  post: ClientOptions,
): Promise<Renderings | { error: string }> {
  const renderings: (readonly number[])[] = [];
  const warnings: string[] = [];
  for (const [i, document] of documents.entries()) {
    if (opts.signal.aborted) return { error: 'cancelled' };
    const r = await renderDocument(target.url, document, post);
    if (!r.ok) return { error: r.error };
    renderings.push(r.tokens);
    const name = opts.names?.[i] ?? `warmup.documents[${i}]`;
    const varies = await checkDateVariance(target.url, name, document, post);
    if (varies) warnings.push(varies);
  }
  return {
    rendered: digestRenderings(renderings),
    warnings: [...warnings, ...l3Warnings(target, renderings)],
  };
}

/**
 * What keeps a replica's first request from loading the documents from L3 (SGLang 0.5.23,
 * mem_cache/unified_radix_cache.py): a best_effort prefetch does not wait for the read, and a
 * request whose part past the replica's own match is under prefetch_threshold never asks.
 */
function l3Warnings(target: WarmupTarget, renderings: readonly (readonly number[])[]): string[] {
  const p = target.prefetch;
  if (!target.l3 || !p) return [];
  const out: string[] = [];
  if (p.policy === 'best_effort')
    out.push(
      'hicache.storage.prefetchPolicy best_effort: a request does not wait for its L3 read, so the first ' +
        'request with a document on a replica usually computes it; use timeout (the default) or wait_complete',
    );
  const short = renderings.map((r, i) => [i, r.length] as const).filter(([, n]) => n < p.threshold);
  for (const [i, n] of short)
    out.push(
      `warmup.documents[${i}] renders to ${n} tokens, under the L3 prefetch threshold (${p.threshold}): a ` +
        'replica loads it from L3 only for requests whose part past its own cache reaches the threshold; ' +
        'lower it with "prefetch_threshold" in hicache.storage.extraConfig',
    );
  return out;
}

/** Prefills each document; `wanted` is what L3 should then hold that the warm-up did not find cached. */
async function prefillAll(
  target: WarmupTarget,
  documents: readonly string[],
  opts: WarmupSendOptions,
  post: ClientOptions,
): Promise<{ tokens: number; wanted: number } | { error: string }> {
  const random = toRandom32(opts.random ?? Math.random);
  let tokens = 0;
  let wanted = 0;
  for (const document of documents) {
    if (opts.signal.aborted) return { error: 'cancelled' };
    const r = await prefillOne(target, document, post, random);
    if (!r.ok) return { error: r.error };
    const prompt = r.usage?.prompt_tokens ?? 0;
    const cached = r.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    tokens += prompt;
    // What the warm-up found cached needs no backup: it is in L3 already, or on this replica.
    wanted += Math.max(0, cacheableTokens(prompt, target.pageSize) - cached);
  }
  return { tokens, wanted };
}

/** Renders, then prefills (or, when L3 holds the same rendering, does not); the outcome says which. */
export async function sendWarmupDocuments(
  target: WarmupTarget,
  documents: readonly string[],
  opts: WarmupSendOptions,
): Promise<WarmupOutcome> {
  const post: ClientOptions = { timeoutMs: opts.timeoutMs, signal: opts.signal, apiKey: opts.apiKey };
  const r = await renderAll(target, documents, opts, post);
  if ('error' in r) return fail(r.error);
  const { rendered, warnings } = r;
  if (target.l3 && target.deliveredRendering === rendered)
    return { ok: true, source: 'storage', rendered, tokens: 0, storedTokens: 0, warnings };
  if (!target.l3) {
    const p = await prefillAll(target, documents, opts, post);
    if ('error' in p) return fail(p.error);
    return { ok: true, source: 'prefill', rendered, tokens: p.tokens, storedTokens: 0, warnings };
  }
  const before = await readBackedUp(target.url, post);
  if (before === undefined)
    return fail(`${target.pod}: its /metrics did not answer, so an L3 delivery cannot be confirmed`);
  const p = await prefillAll(target, documents, opts, post);
  if ('error' in p) return fail(p.error);
  const stored = await waitForStore(target, before, p.wanted, opts, post);
  if (!stored.ok) return fail(stored.error);
  return { ok: true, source: 'prefill', rendered, tokens: p.tokens, storedTokens: stored.stored, warnings };
}
