// Bounded retries with exponential backoff for what `TransientFailure` marks as worth another
// attempt; anything else (a refusal, a digest mismatch, a full disk) ends the attempt at once.
import { FetchFailure, TransientFailure } from './fetch-reasons.ts';

export interface RetryPolicy {
  /** Attempts after the first. */
  readonly retries: number;
  /** The first wait; each next one doubles, up to `maxBackoffMs`. */
  readonly backoffMs: number;
  readonly maxBackoffMs?: number;
  /** Injected so tests do not wait. */
  readonly sleep: (ms: number) => Promise<void>;
}

export async function withRetries<T>(
  what: string,
  policy: RetryPolicy,
  attempt: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (e) {
      if (!(e instanceof TransientFailure) || signal?.aborted) throw e;
      if (n > policy.retries)
        throw new FetchFailure('DownloadFailed', `${what}: gave up after ${n} attempts: ${e.message}`, {
          cause: e,
        });
      await policy.sleep(Math.min(policy.backoffMs * 2 ** (n - 1), policy.maxBackoffMs ?? 30_000));
    }
  }
}
