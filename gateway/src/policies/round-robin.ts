// round-robin: endpoints in turn. The cursor moves when a request is routed
// (observe), so `select` stays a pure read and a retry does not skip a turn.

import type { EndpointView, Policy, RouteOutcome } from './policy.ts';

export class RoundRobinPolicy implements Policy {
  readonly name = 'round-robin';
  #cursor = 0;

  select(endpoints: readonly EndpointView[]): number | undefined {
    return endpoints.length === 0 ? undefined : this.#cursor % endpoints.length;
  }

  observe(outcome: RouteOutcome): void {
    if (outcome.kind === 'routed') this.#cursor = (this.#cursor + 1) % 1_000_000_007;
  }
}
