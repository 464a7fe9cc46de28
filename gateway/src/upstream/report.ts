// What a runtime response says about its cache: prompt tokens, cached tokens
// and their device/host split. OpenAI bodies carry it in `usage` (cached only
// with --enable-cache-report and when positive, else null: then unknown, and
// unknown never becomes zero); native /generate in `meta_info`.

import type { CacheReport } from '../policies/index.ts';

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function computeCacheReport(json: unknown): CacheReport | undefined {
  const item: unknown = Array.isArray(json) ? (json as unknown[])[0] : json;
  if (!isObj(item)) return undefined;
  const meta = item['meta_info'];
  if (isObj(meta)) {
    const promptTokens = num(meta['prompt_tokens']);
    const cachedTokens = num(meta['cached_tokens']);
    if (promptTokens === undefined || cachedTokens === undefined) return undefined;
    const details = meta['cached_tokens_details'];
    const device = isObj(details) ? num(details['device']) : undefined;
    const host = isObj(details) ? num(details['host']) : undefined;
    return {
      promptTokens,
      cachedTokens,
      ...(device !== undefined && host !== undefined ? { deviceTokens: device, hostTokens: host } : {}),
    };
  }
  const usage = item['usage'];
  if (isObj(usage)) {
    const promptTokens = num(usage['prompt_tokens']);
    const details = usage['prompt_tokens_details'];
    const cachedTokens = isObj(details) ? num(details['cached_tokens']) : undefined;
    if (promptTokens === undefined || cachedTokens === undefined) return undefined;
    return { promptTokens, cachedTokens };
  }
  return undefined;
}

export function extractCacheReport(text: string): CacheReport | undefined {
  return extractAnswerUsage(text).report;
}

/** What an answer says it used: its cache report, and the tokens it generated (a tenant's token limit). */
export interface AnswerUsage {
  readonly report: CacheReport | undefined;
  readonly completionTokens: number | undefined;
}

const NO_USAGE: AnswerUsage = { report: undefined, completionTokens: undefined };

/**
 * Completion tokens as the runtime counted them: OpenAI `usage` (over every choice), or native
 * `meta_info`, summed over the items of a /generate batch (one per prompt and sample).
 */
export function computeCompletionTokens(json: unknown): number | undefined {
  if (!Array.isArray(json)) return computeItemCompletionTokens(json);
  let sum: number | undefined;
  for (const item of json as unknown[]) {
    const tokens = computeItemCompletionTokens(item);
    if (tokens !== undefined) sum = (sum ?? 0) + tokens;
  }
  return sum;
}

function computeItemCompletionTokens(item: unknown): number | undefined {
  if (!isObj(item)) return undefined;
  const meta = item['meta_info'];
  if (isObj(meta)) return num(meta['completion_tokens']);
  const usage = item['usage'];
  return isObj(usage) ? num(usage['completion_tokens']) : undefined;
}

/** One parse of an answer's text for both. */
export function extractAnswerUsage(text: string): AnswerUsage {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return NO_USAGE;
  }
  return { report: computeCacheReport(json), completionTokens: computeCompletionTokens(json) };
}

/** True when the runtime aborted the generation (the answer is partial). */
export function isAbortedAnswer(json: unknown): boolean {
  const item: unknown = Array.isArray(json) ? (json as unknown[])[0] : json;
  if (!isObj(item)) return true;
  const meta = item['meta_info'];
  if (isObj(meta)) {
    const fr = meta['finish_reason'];
    return isObj(fr) && fr['type'] === 'abort';
  }
  const choices = item['choices'];
  return Array.isArray(choices) && choices.some((c) => isObj(c) && c['finish_reason'] === 'abort');
}

const MAX_PENDING_CHARS = 1 << 20;

/**
 * Watches an SSE stream for the last event that reports usage, without
 * holding the stream: only the unfinished tail event is kept. A streamed
 * /generate batch interleaves its items' events, each with its `index` and
 * its own running completion_tokens: those are summed over the items, the
 * last event alone being one item's.
 */
/**
 * A stream's progress goes to the policy every this many data events (output tokens): its decode
 * load falls as the answer streams, without a policy update (and a load exchange message) per
 * token. The proxy's relay counts them; behind Envoy the picker counts or estimates them.
 */
export const PROGRESS_EVENTS = 16;

/** Whether going from `before` to `after` output tokens passed a multiple of PROGRESS_EVENTS. */
export function passedProgressStep(before: number, after: number): boolean {
  return Math.floor(after / PROGRESS_EVENTS) > Math.floor(before / PROGRESS_EVENTS);
}

export class SseReportSniffer {
  #tail = '';
  #last: string | undefined;
  #dataEvents = 0;
  readonly #decoder = new TextDecoder();
  /** Each batch item's latest completion_tokens, by index; none for a single sequence. */
  readonly #itemTokens: (number | undefined)[] | undefined;

  /** `sequences`: what the request asked for (prompts x n), which bounds the indexes a runtime may send. */
  constructor(sequences = 1) {
    this.#itemTokens = sequences > 1 ? new Array<number | undefined>(sequences) : undefined;
  }

  /** Data events read so far, `[DONE]` aside: each carries one output token or more, but a final usage event. */
  get dataEvents(): number {
    return this.#dataEvents;
  }

  /** `push`, then `onProgress(dataEvents)` if the chunk passed a multiple of PROGRESS_EVENTS. */
  pushCountingProgress(chunk: Uint8Array, onProgress: (tokens: number) => void): void {
    const before = this.#dataEvents;
    this.push(chunk);
    if (passedProgressStep(before, this.#dataEvents)) onProgress(this.#dataEvents);
  }

  push(chunk: Uint8Array): void {
    this.#tail += this.#decoder.decode(chunk, { stream: true });
    let cut = this.#tail.indexOf('\n\n');
    while (cut >= 0) {
      const event = this.#tail.slice(0, cut);
      this.#tail = this.#tail.slice(cut + 2);
      if (event.startsWith('data: ') && !event.startsWith('data: [DONE]')) this.#dataEvents++;
      if (event.startsWith('data: ') && event.includes('"prompt_tokens"')) {
        this.#last = event.slice(6);
        if (this.#itemTokens && event.includes('"index"')) this.#countItem(this.#last);
      }
      cut = this.#tail.indexOf('\n\n');
    }
    if (this.#tail.length > MAX_PENDING_CHARS) this.#tail = '';
  }

  report(): CacheReport | undefined {
    return this.usage().report;
  }

  usage(): AnswerUsage {
    const last = this.#last === undefined ? NO_USAGE : extractAnswerUsage(this.#last);
    let sum: number | undefined;
    for (const tokens of this.#itemTokens ?? []) if (tokens !== undefined) sum = (sum ?? 0) + tokens;
    return sum === undefined ? last : { report: last.report, completionTokens: sum };
  }

  /** A native batch item's event: its completion_tokens so far, kept under its index. */
  #countItem(data: string): void {
    const items = this.#itemTokens;
    let item: unknown;
    try {
      item = JSON.parse(data);
    } catch {
      return;
    }
    if (!items || !isObj(item) || !isObj(item['meta_info'])) return;
    const index = item['index'];
    const tokens = computeItemCompletionTokens(item);
    if (Number.isInteger(index) && (index as number) >= 0 && (index as number) < items.length)
      items[index as number] = tokens;
  }
}
