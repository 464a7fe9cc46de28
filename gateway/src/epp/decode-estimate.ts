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
//
// Where the runtime's KV events measure answers' real output lengths
// (kv-index/output-attribution.ts, ADR 0049), the unit is the real token:
//   realPace(e)   = EWMA of (end - first byte) / (output - 1) over e's measured streams
//   streamed(r)   = 1 + (now - r's first byte) / realPace(e)
//   to come(r)    = E[min(L, max_tokens) - streamed | L > streamed], L drawn from
//                   e's measured lengths (output-length-model.ts)
// and the request is reported as having streamed predicted - to come, so its
// decode load is that expectation (it can only fall: 'decoding' lowers it).
// A measurement that comes while the answer still streams means the runtime
// has finished it: the rest is on its way, nothing is left to decode. One that
// comes after the answer ended carries the stream's timing back (the
// attribution keeps the only book of ended answers and their grace): `end`
// returns it, the exchange hands it to the attribution with the answer's end.

import type { Clock, Timer } from '#kube/clock.ts';
import type { MeasuredOutput } from '../kv-index/output-attribution.ts';
import { passedProgressStep } from '../upstream/report.ts';
import { OutputLengthModel } from './output-length-model.ts';

/** How often streams are looked at: a 16-token step of a 30 ms/token stream is ~0.5 s. */
export const TICK_MS = 100;
/** Weight of the newest stream in an endpoint's pace: about the last 10 streams. */
const ALPHA = 0.1;

/** A stream's identity for its measured output: the request id and its max_tokens. */
export interface StreamIdentity {
  readonly id: string;
  readonly cap?: number;
}

/** One streamed answer being decoded on an endpoint. */
export interface DecodingStream {
  /**
   * The answer ended (the ext_proc stream's end); `complete`: it ran to its end (a 2xx, streamed).
   * Returns how long it streamed (first byte to end) when it ran to its end unmeasured: its
   * measurement, coming later, brings it back (MeasuredOutput.streamedMs).
   */
  end(complete: boolean): number | undefined;
}

interface Stream {
  readonly endpoint: string;
  readonly predicted: number;
  readonly startedAt: number;
  readonly report: (tokens: number) => void;
  readonly who: StreamIdentity | undefined;
  reported: number;
  /** Its output, measured while it still streamed. */
  measured?: number;
}

export class DecodeEstimate {
  readonly #clock: Clock;
  /** Per endpoint: ms per predicted output token, from streams that ended. */
  readonly #pace = new Map<string, number>();
  /** Per endpoint: ms per real output token, from measured streams. */
  readonly #realPace = new Map<string, number>();
  /** Per endpoint: its measured output lengths. */
  readonly #lengths = new Map<string, OutputLengthModel>();
  readonly #streams = new Set<Stream>();
  readonly #byId = new Map<string, Stream>();
  #timer: Timer | undefined;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** An endpoint's measured pace (ms per predicted token); undefined before its first stream ended. */
  paceOf(endpoint: string): number | undefined {
    return this.#pace.get(endpoint);
  }

  /** An endpoint's pace in real output tokens (ms a token); undefined before a measured stream. */
  realPaceOf(endpoint: string): number | undefined {
    return this.#realPace.get(endpoint);
  }

  /** An endpoint's measured output lengths. */
  lengthsOf(endpoint: string): OutputLengthModel | undefined {
    return this.#lengths.get(endpoint);
  }

  /**
   * A request's output length, measured from `endpoint`'s KV events: the endpoint's lengths learn
   * it, and its stream (still streaming, or ended and timed: `m.streamedMs`) the real pace.
   */
  measured(endpoint: string, m: MeasuredOutput): void {
    let lengths = this.#lengths.get(endpoint);
    if (!lengths) this.#lengths.set(endpoint, (lengths = new OutputLengthModel()));
    lengths.learn(m.min, m.max, m.cap);
    // One that may have reached its max_tokens did (exact at page size 1); else the page's middle.
    const output = m.cap !== undefined && m.max >= m.cap ? m.cap : (m.min + m.max) / 2;
    const open = this.#byId.get(m.id);
    if (open?.endpoint === endpoint) {
      open.measured = output;
      // The runtime finished it: what is left is in transit, not to decode.
      if (open.reported < open.predicted) {
        open.reported = open.predicted;
        open.report(open.predicted);
      }
      return;
    }
    if (m.streamedMs !== undefined) this.#learnReal(endpoint, m.streamedMs, output);
  }

  /**
   * A streamed answer's first byte: from now until `end`, `report(tokens)` is called each time
   * the estimate passes a multiple of PROGRESS_EVENTS (upstream/report.ts; tokens: the estimate, at most `predicted`).
   */
  start(
    endpoint: string,
    predicted: number,
    report: (tokens: number) => void,
    who?: StreamIdentity,
  ): DecodingStream {
    const s: Stream = { endpoint, predicted, startedAt: this.#clock.now(), report, who, reported: 0 };
    this.#streams.add(s);
    if (who) this.#byId.set(who.id, s);
    this.#arm();
    let ended = false;
    return {
      end: (complete) => {
        if (ended) return undefined;
        ended = true;
        this.#streams.delete(s);
        if (who && this.#byId.get(who.id) === s) this.#byId.delete(who.id);
        const ms = this.#clock.now() - s.startedAt;
        if (complete && predicted > 0) this.#learn(endpoint, ms / predicted);
        if (!complete || !who) return undefined;
        if (s.measured === undefined) return ms;
        this.#learnReal(endpoint, ms, s.measured);
        return undefined;
      },
    };
  }

  close(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#streams.clear();
    this.#byId.clear();
  }

  /** A stream of `output` tokens took `ms` from its first byte to its end. */
  #learnReal(endpoint: string, ms: number, output: number): void {
    if (!(output > 1)) return;
    const msPerToken = ms / (output - 1);
    const prev = this.#realPace.get(endpoint);
    this.#realPace.set(endpoint, prev === undefined ? msPerToken : prev + ALPHA * (msPerToken - prev));
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
      const tokens = this.#measuredEstimate(s, now) ?? this.#timeEstimate(s, now);
      if (tokens === undefined) continue;
      const step = passedProgressStep(s.reported, tokens);
      // The whole prediction streamed: said once, also when it is not a multiple of the step.
      if (!step && !(tokens === s.predicted && tokens > s.reported)) continue;
      s.reported = tokens;
      s.report(tokens);
    }
  }

  /** Streamed in units of the prediction, at the endpoint's pace in them (undefined before it has one). */
  #timeEstimate(s: Stream, now: number): number | undefined {
    const pace = this.#pace.get(s.endpoint);
    if (pace === undefined) return undefined;
    return Math.min(s.predicted, pace > 0 ? Math.floor((now - s.startedAt) / pace) : s.predicted);
  }

  /** predicted - the output expected still to come (undefined before the endpoint's lengths and real pace are known). */
  #measuredEstimate(s: Stream, now: number): number | undefined {
    const pace = this.#realPace.get(s.endpoint);
    const lengths = this.#lengths.get(s.endpoint);
    if (pace === undefined || !lengths || !(pace > 0)) return undefined;
    const streamed = 1 + (now - s.startedAt) / pace;
    const toCome = lengths.remaining(streamed, s.who?.cap);
    if (toCome === undefined) return undefined;
    return Math.max(0, Math.min(s.predicted, Math.floor(s.predicted - toCome)));
  }
}
