// A streamed answer's progress, estimated where the picker does not see it.
// Behind Envoy the response body goes from the runtime to the client past the
// picker; the picker sees the response headers (the first byte) and, with the
// reference bootstrap's response_trailer_mode SEND, the ext_proc stream's end
// at the response's real end (ADR 0043). Between the two the proxy's relay
// counts SSE events (every 16 it reports 'decoding', and the request's decode
// load falls); here time stands in for them:
//   msPerToken(e) = EWMA over e's streams that ran to their end of
//                   (end - first byte) / the output the policy predicted
//   streamed(r)   = (now - r's first byte) / msPerToken(e), at most predicted,
//                   reported each time it passes a multiple of 16
// The unit is the policy's own prediction, so the estimate calibrates itself:
// an endpoint whose answers end sooner than predicted drains its predicted
// decode sooner, at the pace its streams really end. Before an endpoint's
// first measured stream nothing is reported (the decode load stays whole
// until the end, as before). Measured on the simulators against the counted
// events: docs/picker.md, "A streamed answer's progress".

import type { Clock, Timer } from '#kube/clock.ts';
import { passedProgressStep } from '../upstream/report.ts';

/** How often streams are looked at: a 16-token step of a 30 ms/token stream is ~0.5 s. */
export const TICK_MS = 100;
/** Weight of the newest stream in an endpoint's pace: about the last 10 streams. */
const ALPHA = 0.1;

/** One streamed answer being decoded on an endpoint. */
export interface DecodingStream {
  /** The answer ended (the ext_proc stream's end); `complete`: it ran to its end (a 2xx, streamed). */
  end(complete: boolean): void;
}

interface Stream {
  readonly endpoint: string;
  readonly predicted: number;
  readonly startedAt: number;
  readonly report: (tokens: number) => void;
  reported: number;
}

export class DecodeEstimate {
  readonly #clock: Clock;
  /** Per endpoint: ms per predicted output token, from streams that ended. */
  readonly #pace = new Map<string, number>();
  readonly #streams = new Set<Stream>();
  #timer: Timer | undefined;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** An endpoint's measured pace (ms per predicted token); undefined before its first stream ended. */
  paceOf(endpoint: string): number | undefined {
    return this.#pace.get(endpoint);
  }

  /**
   * A streamed answer's first byte: from now until `end`, `report(tokens)` is called each time
   * the estimate passes a multiple of PROGRESS_EVENTS (upstream/report.ts; tokens: the estimate, at most `predicted`).
   */
  start(endpoint: string, predicted: number, report: (tokens: number) => void): DecodingStream {
    const s: Stream = { endpoint, predicted, startedAt: this.#clock.now(), report, reported: 0 };
    this.#streams.add(s);
    this.#arm();
    let ended = false;
    return {
      end: (complete) => {
        if (ended) return;
        ended = true;
        this.#streams.delete(s);
        if (complete && predicted > 0) this.#learn(endpoint, (this.#clock.now() - s.startedAt) / predicted);
      },
    };
  }

  close(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#streams.clear();
  }

  #learn(endpoint: string, msPerToken: number): void {
    const prev = this.#pace.get(endpoint);
    this.#pace.set(endpoint, prev === undefined ? msPerToken : prev + ALPHA * (msPerToken - prev));
  }

  /** One timer while streams are being decoded; none when idle. */
  #arm(): void {
    if (this.#timer || this.#streams.size === 0) return;
    this.#timer = this.#clock.setTimer(TICK_MS, () => {
      this.#timer = undefined;
      this.#tick();
      this.#arm();
    });
  }

  #tick(): void {
    const now = this.#clock.now();
    for (const s of this.#streams) {
      const pace = this.#pace.get(s.endpoint);
      if (pace === undefined) continue;
      const tokens = Math.min(s.predicted, pace > 0 ? Math.floor((now - s.startedAt) / pace) : s.predicted);
      const step = passedProgressStep(s.reported, tokens);
      // The whole prediction streamed: said once, also when it is not a multiple of the step.
      if (!step && !(tokens === s.predicted && tokens > s.reported)) continue;
      s.reported = tokens;
      s.report(tokens);
    }
  }
}
