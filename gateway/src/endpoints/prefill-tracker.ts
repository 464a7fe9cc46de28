// CacheRoute's predicted backlog, per endpoint: the prompt tokens this
// gateway sent whose first byte has not come back (prefill not over), and
// the endpoint's prefill rate learned from streamed answers. least-load turns
// them into seconds of queued prefill (policies/least-load.ts).
//
// A rate sample is taken only from a request that was alone in its
// endpoint's backlog when sent, and only when its first byte was seen
// (streamed): then time to first byte is its own prefill, not a queue, and
// the tokens it prefilled are its prompt minus what the runtime reported
// cached. Units are the routing tokens of RouteInput (pseudo-tokens for text);
// the runtime's cache report is scaled to them.

export interface PrefillReport {
  readonly promptTokens: number;
  readonly cachedTokens: number;
}

interface Sent {
  readonly endpoint: string;
  readonly tokens: number;
  readonly sentAt: number;
  /** Nothing else of this gateway was prefilling on the endpoint when sent. */
  readonly alone: boolean;
  /** Still counted in the endpoint's pending tokens. */
  pending: boolean;
  firstByteMs: number | undefined;
}

const RATE_ALPHA = 0.2;
const MAX_TRACKED = 100_000;
/** Shorter first bytes are timer noise, not a prefill. */
const MIN_SAMPLE_MS = 1;

export class PrefillTracker {
  readonly #sent = new Map<string, Sent>();
  readonly #pending = new Map<string, number>();
  readonly #rate = new Map<string, number>();

  /** A request went to `endpoint` at `now` (ms) with `tokens` prompt tokens. */
  sent(id: string, endpoint: string, tokens: number, now: number): void {
    if (this.#sent.size >= MAX_TRACKED) {
      const oldest = this.#sent.keys().next().value as string;
      this.finished(oldest, undefined);
    }
    const alone = (this.#pending.get(endpoint) ?? 0) === 0;
    this.#sent.set(id, { endpoint, tokens, sentAt: now, alone, pending: true, firstByteMs: undefined });
    this.#pending.set(endpoint, (this.#pending.get(endpoint) ?? 0) + tokens);
  }

  /** Its first body byte arrived: prefill is over. */
  firstByte(id: string, now: number): void {
    const s = this.#sent.get(id);
    if (!s) return;
    s.firstByteMs = now - s.sentAt;
    this.#settle(s);
  }

  /** It ended (answer complete, failed or abandoned); learn the rate from its report if it can. */
  finished(id: string, report: PrefillReport | undefined): void {
    const s = this.#sent.get(id);
    if (!s) return;
    this.#sent.delete(id);
    this.#settle(s);
    if (!report || !s.alone || s.firstByteMs === undefined || s.firstByteMs < MIN_SAMPLE_MS) return;
    if (report.promptTokens <= 0) return;
    const uncachedShare = Math.max(0, report.promptTokens - report.cachedTokens) / report.promptTokens;
    const prefilled = s.tokens * uncachedShare;
    if (prefilled <= 0) return;
    const sample = prefilled / (s.firstByteMs / 1000);
    const prev = this.#rate.get(s.endpoint);
    this.#rate.set(s.endpoint, prev === undefined ? sample : prev + RATE_ALPHA * (sample - prev));
  }

  pendingTokens(endpoint: string): number {
    return this.#pending.get(endpoint) ?? 0;
  }

  /** Learned prefill rate, tokens/s; undefined until a clean sample. */
  tokensPerSecond(endpoint: string): number | undefined {
    return this.#rate.get(endpoint);
  }

  #settle(s: Sent): void {
    if (!s.pending) return;
    s.pending = false;
    const left = (this.#pending.get(s.endpoint) ?? 0) - s.tokens;
    if (left > 0) this.#pending.set(s.endpoint, left);
    else this.#pending.delete(s.endpoint);
  }
}
