// What a prefill does to the answers decoding beside it (ADR 0054).
//
// SGLang's scheduler runs a prefill batch before the next decode step (without mixed chunks,
// its default): while a runtime prefills a prompt's uncached tokens, every request decoding
// there waits, one gap in each stream of uncached / prefill rate seconds. A miss sent where
// n answers are streaming adds that gap to n end-to-end latencies, where TTFT alone sees one.
// The policy's decode term prices a token still to stream at decodeWeight backlog tokens;
// a stall of uncached / rate seconds is uncached / (rate x step) decode steps, each a token
// not streamed, for each of the n: so the stall costs
//
//   decodeWeight x n x uncached / prefillTokensPerDecodeStep
//
// in the same backlog tokens, where prefillTokensPerDecodeStep = prefill rate x decode step
// time (the bench's engines: 8,000 tok/s x about 10 ms, 80).
//
// n counts the answers the prefill will pause, counted fresh: every request the tier has in
// flight there (this replica's own picks at once, the peers' as the exchange delivers them),
// the queued ones included, since FCFS prefills them first and they are decoding when this
// prompt's turn comes; or the runtime's own running count where that is larger (traffic from
// outside the tier). The running count alone lags the picks by its refresh (30 ms in the
// bench) and misses the queue: misses then herded onto a runtime just loaded (ADR 0054).

import type { EndpointView } from './policy.ts';

/** Prefill tokens a runtime computes in the time of one decode step, by default (see above). */
export const PREFILL_TOKENS_PER_DECODE_STEP = 80;

/** Requests a prefill on `e` would pause: the tier's in flight there, or the runtime's running count if larger. */
export function decodersOn(e: EndpointView): number {
  return Math.max(e.running ?? 0, e.inFlight + (e.peers?.inFlight ?? 0));
}

/**
 * The cost, in backlog tokens, of prefilling `uncached` tokens on `e` for the requests it pauses;
 * 0 with decodeWeight 0 (prefill only).
 */
export function stallCost(
  e: EndpointView,
  uncached: number,
  decodeWeight: number,
  prefillTokensPerDecodeStep = PREFILL_TOKENS_PER_DECODE_STEP,
): number {
  if (!(decodeWeight > 0) || !(uncached > 0) || !(prefillTokensPerDecodeStep > 0)) return 0;
  return (decodeWeight * decodersOn(e) * uncached) / prefillTokensPerDecodeStep;
}
