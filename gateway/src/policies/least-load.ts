// least-load: the endpoint with the lowest predicted load.
//
//   backlog(e) = pendingPrefillTokens(e) / prefillTokensPerSecond(e)   [s]
//                (prompt tokens sent by this gateway still before their first
//                 byte, over the endpoint's learned prefill rate; 0 if unknown)
//   score(e)   = inFlight(e) + queued(e) + backlogWeight × backlog(e)
//   choose     = argmin score; ties rotate (a cursor advanced per routed request)
//
// backlogWeight converts seconds of queued prefill into request equivalents
// (default 10: one second of backlog weighs as much as ten queued requests),
// so two endpoints with equal counts are told apart by what they still have
// to prefill.

import { indexOfMin, loadOf, type EndpointView, type Policy, type RouteOutcome } from './policy.ts';

export interface LeastLoadConfig {
  readonly backlogWeight?: number;
}

export function computeBacklogSeconds(e: EndpointView): number {
  const rate = e.prefillTokensPerSecond ?? 0;
  const pending = e.pendingPrefillTokens ?? 0;
  return rate > 0 && pending > 0 ? pending / rate : 0;
}

export class LeastLoadPolicy implements Policy {
  readonly name = 'least-load';
  readonly #backlogWeight: number;
  #cursor = 0;

  constructor(cfg: LeastLoadConfig = {}) {
    this.#backlogWeight = cfg.backlogWeight ?? 10;
  }

  select(endpoints: readonly EndpointView[]): number | undefined {
    const w = this.#backlogWeight;
    return indexOfMin(
      endpoints,
      (e) => loadOf(e) + w * computeBacklogSeconds(e),
      this.#cursor % Math.max(1, endpoints.length),
    );
  }

  observe(outcome: RouteOutcome): void {
    if (outcome.kind === 'routed') this.#cursor = (this.#cursor + 1) % 1_000_000_007;
  }
}
