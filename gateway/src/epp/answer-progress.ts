// What the picker learns of one answer after its first byte, whichever way
// the data plane lets it: the body's SSE events counted, as the proxy's relay
// counts them, where the response body passes through the picker (the
// bootstrap's response_body_mode; GIE's reference bootstrap sends it); else
// the progress estimated from time (decode-estimate.ts). Either way a report
// every 16 tokens lowers the request's decode load, and the cache report in a
// counted body's usage event reaches the policy at the end.

import type { CacheReport } from '../policies/index.ts';
import { SseReportSniffer } from '../upstream/report.ts';
import type { DecodeEstimate, DecodingStream, StreamIdentity } from './decode-estimate.ts';

/** How an answer ended: its counted body's cache report; its estimated stream's timing, to be measured. */
export interface AnswerEnd {
  readonly report?: CacheReport;
  /** First byte to end, when the estimate ran to the end unmeasured (DecodingStream.end). */
  readonly streamedMs?: number;
}

export class AnswerProgress {
  readonly #report: (tokens: number) => void;
  #estimate: DecodingStream | undefined;
  #counted: SseReportSniffer | undefined;

  /** `report(tokens)`: at least this many output tokens streamed so far. */
  constructor(report: (tokens: number) => void) {
    this.#report = report;
  }

  /** A streamed answer started on `endpoint`: estimated from now, unless its body is seen. */
  estimate(estimate: DecodeEstimate, endpoint: string, predicted: number, who?: StreamIdentity): void {
    this.#estimate = estimate.start(endpoint, predicted, this.#report, who);
  }

  /** A chunk of the response body (the data plane sends it): counted; the estimate stops. */
  body(chunk: Uint8Array): void {
    if (this.#estimate) {
      this.#estimate.end(false);
      this.#estimate = undefined;
    }
    (this.#counted ??= new SseReportSniffer()).pushCountingProgress(chunk, this.#report);
  }

  /** The answer is over (`complete`: ran to its end). */
  end(complete: boolean): AnswerEnd {
    const streamedMs = this.#estimate?.end(complete);
    this.#estimate = undefined;
    const report = this.#counted?.report();
    return { ...(report ? { report } : {}), ...(streamedMs !== undefined ? { streamedMs } : {}) };
  }
}
