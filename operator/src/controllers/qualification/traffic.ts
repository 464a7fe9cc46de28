// One pass of a sample against one arm's own endpoint (never the gateway):
// every request a streamed native /generate under the sample's cache salt, at
// most `concurrency` in flight, in the workload's order. Time to first token is
// the first streamed chunk; end-to-end is the [DONE]. Every request yields a
// record: a failure is recorded with its reason, never dropped or retried.
import { z } from 'zod';
import type { Sampling } from '#api/task.ts';
import { buildRuntimeAuthHeaders } from '#api/runtime-key.ts';
import { buildBootstrapFields, computeBootstrapRoom, toRandom32 } from '#sglang/bootstrap.ts';
import { SIMULATOR_HEADER } from '#sglang/simulator.ts';
import type { ArmPrefill } from './arms.ts';
import { setTimeout as sleepFor } from 'node:timers/promises';
import type { PassRecord, RequestRecord } from './record.ts';
import type { Pace, WorkloadRequest } from './workload.ts';

/** One streamed event larger than this is refused: the runtime image is the namespace user's. */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;

export interface PassOptions {
  url: string;
  /**
   * A disaggregated arm: every request also goes to this prefill, with the bootstrap
   * fields the gateway's pairs carry (#sglang/bootstrap.ts); `url` is then the decode,
   * whose stream is measured (SGLang's decode reports the prefill's cached tokens).
   */
  prefill?: ArmPrefill | undefined;
  salt: string;
  sampling: z.output<typeof Sampling>;
  maxNewTokens: number;
  pace: Pace;
  apiKey?: string | undefined;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  /** Milliseconds, monotonic (injected for tests). */
  clock?: () => number;
  /** Uniform in [0, 1): a pair's bootstrap room (injected for tests). */
  random?: () => number;
  /** Waits until an open loop's next arrival (injected for tests); resolves early on abort. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/**
 * Node starts a timer at the loop's millisecond, rounded down, so it can fire up
 * to a millisecond early: sleep again for what is left, so no request goes out
 * before its arrival.
 */
async function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  const until = performance.now() + ms;
  for (let left = ms; left > 0 && !signal?.aborted; left = until - performance.now())
    await sleepFor(left, undefined, signal ? { signal } : {}).catch(() => undefined);
}

const Counter = z.number().int().nonnegative().nullish();
const Meta = z.looseObject({
  prompt_tokens: Counter,
  completion_tokens: Counter,
  cached_tokens: Counter,
  cached_tokens_details: z.looseObject({ device: Counter, host: Counter, storage: Counter }).nullish(),
  finish_reason: z.looseObject({ type: z.string() }).nullish(),
});
const Chunk = z.looseObject({ meta_info: Meta });

/**
 * Every request generates exactly maxNewTokens (ignore_eos): both arms then
 * decode the same number of tokens, whatever the model would have said.
 */
export function buildGenerateBody(text: string, opts: PassOptions): Record<string, unknown> {
  const s = opts.sampling;
  const params: Record<string, unknown> = {
    max_new_tokens: opts.maxNewTokens,
    temperature: s.temperature,
    ignore_eos: true,
  };
  if (s.topP !== undefined) params['top_p'] = s.topP;
  if (s.topK !== undefined) params['top_k'] = s.topK;
  if (s.stop !== undefined) params['stop'] = s.stop;
  if (s.seed !== undefined) params['sampling_seed'] = s.seed;
  return { text, sampling_params: params, cache_salt: opts.salt, stream: true };
}

/** Yields the `data:` payloads of a server-sent event stream. */
async function* readEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (data !== '') yield data;
    }
    if (buffer.length > MAX_EVENT_BYTES)
      throw new Error(`a streamed event is larger than ${MAX_EVENT_BYTES} bytes`);
  }
}

function failure(id: string, error: string, simulator?: boolean): RequestRecord {
  return { id, ok: false, error, ...(simulator === undefined ? {} : { simulator }) };
}

function usageOf(meta: z.infer<typeof Meta>): Omit<RequestRecord, 'id' | 'ok'> | string {
  const { prompt_tokens: p, completion_tokens: c, cached_tokens: cached } = meta;
  if (p == null || c == null || cached == null)
    return 'meta_info lacks prompt_tokens, completion_tokens or cached_tokens';
  const d = meta.cached_tokens_details;
  return {
    promptTokens: p,
    completionTokens: c,
    cachedTokens: cached,
    cachedDevice: d?.device ?? (d ? 0 : cached),
    cachedHost: d?.host ?? 0,
    cachedStorage: d?.storage ?? 0,
  };
}

/** The prefill's half of a pair: its whole answer read and dropped; why it failed, or undefined. */
async function runPrefill(
  prefill: ArmPrefill,
  body: Record<string, unknown>,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<string | undefined> {
  try {
    const res = await fetch(`${prefill.url}/generate`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal,
    });
    await res.arrayBuffer();
    return res.ok ? undefined : `prefill ${prefill.pod}: HTTP ${res.status}`;
  } catch (e) {
    return `prefill ${prefill.pod}: ${e instanceof Error ? e.message : String(e)}`;
  }
}

export async function runRequest(req: WorkloadRequest, opts: PassOptions): Promise<RequestRecord> {
  const headers = { 'content-type': 'application/json', ...buildRuntimeAuthHeaders(opts.apiKey) };
  const body = buildGenerateBody(req.text, opts);
  const prefill = opts.prefill;
  if (!prefill) return runStreamed(req, opts, body, headers);
  // One room for the pair; both halves at once, as the gateway sends them (forward/pair.ts).
  const room = computeBootstrapRoom(toRandom32(opts.random ?? Math.random));
  const paired = { ...body, ...buildBootstrapFields(prefill.bootstrapHost, prefill.bootstrapPort, room) };
  const stop = new AbortController();
  const signal = AbortSignal.any([
    stop.signal,
    AbortSignal.timeout(opts.timeoutMs),
    ...(opts.signal ? [opts.signal] : []),
  ]);
  const prefilled = runPrefill(prefill, paired, headers, signal);
  const decoded = await runStreamed(req, opts, paired, headers);
  // A decode that failed leaves nothing for the prefill's KV to go to: stop it.
  if (!decoded.ok) stop.abort();
  const prefillError = await prefilled;
  if (prefillError !== undefined && decoded.ok) return failure(req.id, prefillError, decoded.simulator);
  return decoded;
}

async function runStreamed(
  req: WorkloadRequest,
  opts: PassOptions,
  body: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<RequestRecord> {
  const clock = opts.clock ?? (() => performance.now());
  const signal = AbortSignal.any([
    AbortSignal.timeout(opts.timeoutMs),
    ...(opts.signal ? [opts.signal] : []),
  ]);
  const start = clock();
  let simulator: boolean | undefined;
  try {
    const res = await fetch(`${opts.url}/generate`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal,
    });
    simulator = res.headers.has(SIMULATOR_HEADER);
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      return failure(req.id, `POST /generate: HTTP ${res.status}`, simulator);
    }
    let ttftMs: number | undefined;
    let last: z.infer<typeof Meta> | undefined;
    for await (const data of readEvents(res.body)) {
      if (data === '[DONE]') break;
      const parsed = Chunk.safeParse(JSON.parse(data));
      if (!parsed.success)
        return failure(req.id, 'POST /generate: a streamed chunk has no meta_info', simulator);
      ttftMs ??= clock() - start;
      last = parsed.data.meta_info;
    }
    const e2eMs = clock() - start;
    if (!last || ttftMs === undefined)
      return failure(req.id, 'POST /generate: the stream ended without a chunk', simulator);
    if (last.finish_reason?.type === 'abort')
      return failure(req.id, 'POST /generate: the runtime aborted the request', simulator);
    const usage = usageOf(last);
    if (typeof usage === 'string') return failure(req.id, `POST /generate: ${usage}`, simulator);
    return { id: req.id, ok: true, ttftMs: round(ttftMs), e2eMs: round(e2eMs), ...usage, simulator };
  } catch (e) {
    const why = signal.aborted
      ? `no answer within ${opts.timeoutMs} ms`
      : e instanceof Error
        ? e.message
        : String(e);
    return failure(req.id, `POST /generate: ${why}`, simulator);
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/**
 * The requests in order: a closed loop keeps `concurrency` in flight; an open
 * loop sends request i at its arrival offset, whether or not earlier ones were
 * answered. The pass's wall time runs from its start to the last answer.
 * Either way request i is sent no earlier than request i-1, so a record's
 * `sentAtMs` never decreases.
 */
export async function runPass(requests: readonly WorkloadRequest[], opts: PassOptions): Promise<PassRecord> {
  const clock = opts.clock ?? (() => performance.now());
  const out: RequestRecord[] = new Array<RequestRecord>(requests.length);
  const start = clock();
  const send = async (i: number): Promise<void> => {
    const req = requests[i];
    if (!req) return;
    const sentAtMs = round(clock() - start);
    out[i] = { ...(await runRequest(req, opts)), sentAtMs };
  };
  const pace = opts.pace;
  if (pace.kind === 'open') {
    const sleep = opts.sleep ?? defaultSleep;
    // One loop sends them all, each after the one before: a timer per request
    // would let arrivals less than a millisecond apart fire out of order.
    const sent: Promise<void>[] = [];
    for (let i = 0; i < requests.length; i++) {
      const wait = (pace.offsetsMs[i] ?? 0) - (clock() - start);
      if (wait > 0) await sleep(wait, opts.signal);
      sent.push(send(i));
    }
    await Promise.all(sent);
  } else {
    let next = 0;
    const worker = async () => {
      while (next < requests.length) await send(next++);
    };
    const workers = Math.max(1, Math.min(pace.concurrency, requests.length));
    await Promise.all(Array.from({ length: workers }, worker));
  }
  return { wallMs: round(clock() - start), requests: out };
}
