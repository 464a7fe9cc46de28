// Requests to a Deployment sleeping at zero (wakeOnDemand): held here until
// the routing table shows it an endpoint, or until its hold time passes (503
// GW_WAKING with Retry-After). How many are held is in the cache report, which
// is how the operator learns it is wanted (controllers/deployment/wake/): the
// gateway asks for nothing itself. The table is looked at again every
// `pollMs`; held requests are few and short-lived, so no subscription is kept.
// A prefill/decode pair is routable once a prefill has a decode partner: one
// part up is not enough (the operator wakes both together).
import type { Clock } from '#kube/clock.ts';
import { GatewayError } from '../errors/index.ts';
import { hasRoutablePair, isDisaggregated } from '../routing/pd.ts';
import { computeRoutableEndpoints, type ModelRoute } from '../routing/table.ts';

/** The route can serve a request now: a routable endpoint, or a pair with both parts routable. */
const isRoutable = (route: ModelRoute): boolean =>
  isDisaggregated(route) ? hasRoutablePair(route) : computeRoutableEndpoints(route).length > 0;

const POLL_MS = 250;
const RETRY_AFTER_SECONDS = 10;

export class WakeHolds {
  readonly #clock: Clock;
  readonly #pollMs: number;
  readonly #held = new Map<string, number>();

  constructor(clock: Clock, pollMs = POLL_MS) {
    this.#clock = clock;
    this.#pollMs = pollMs;
  }

  /** Requests held for the Deployment (namespace/name) now. */
  heldOf(deployment: string): number {
    return this.#held.get(deployment) ?? 0;
  }

  /** Whether a request for `route` waits here: its Deployment wakes on demand and has no endpoint yet. */
  holds(route: ModelRoute): boolean {
    return route.wake !== undefined && !isRoutable(route);
  }

  /**
   * `route` itself when it can be routed (or does not wake on demand); else, once `relookup` gives
   * it a routable endpoint, that route.
   */
  async untilRoutable(
    route: ModelRoute,
    relookup: () => ModelRoute | undefined,
    signal: AbortSignal,
  ): Promise<ModelRoute> {
    const wake = route.wake;
    if (!wake || isRoutable(route)) return route;
    const { deployment } = route;
    const held = this.heldOf(deployment);
    // At least one is held even with no admission queue: it is what wakes the Deployment.
    if (held >= Math.max(1, route.admission.maxQueue))
      throw new GatewayError(
        'GW_OVERLOADED',
        { deployment, retryAfterSeconds: RETRY_AFTER_SECONDS },
        { retryAfterSeconds: RETRY_AFTER_SECONDS },
      );
    this.#held.set(deployment, held + 1);
    try {
      return await this.#poll(route, wake.holdMs, relookup, signal);
    } finally {
      const left = this.heldOf(deployment) - 1;
      if (left > 0) this.#held.set(deployment, left);
      else this.#held.delete(deployment);
    }
  }

  #poll(
    route: ModelRoute,
    holdMs: number,
    relookup: () => ModelRoute | undefined,
    signal: AbortSignal,
  ): Promise<ModelRoute> {
    const clock = this.#clock;
    const pollMs = this.#pollMs;
    const deadline = clock.now() + holdMs;
    return new Promise((resolve, reject) => {
      let timer: { cancel(): void } | undefined;
      const finish = (outcome: () => void): void => {
        timer?.cancel();
        signal.removeEventListener('abort', onAbort);
        outcome();
      };
      const onAbort = (): void => finish(() => reject(new GatewayError('GW_CLIENT_CLOSED')));
      const check = (): void => {
        const now = relookup();
        // Deleted, or no longer serving the name, while the request waited.
        if (!now) return finish(() => reject(new GatewayError('GW_MODEL_NOT_FOUND', { model: route.model })));
        if (isRoutable(now)) return finish(() => resolve(now));
        if (clock.now() >= deadline)
          return finish(() =>
            reject(
              new GatewayError(
                'GW_WAKING',
                {
                  deployment: route.deployment,
                  holdSeconds: Math.round(holdMs / 1000),
                  retryAfterSeconds: RETRY_AFTER_SECONDS,
                },
                { retryAfterSeconds: RETRY_AFTER_SECONDS },
              ),
            ),
          );
        timer = clock.setTimer(pollMs, check);
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      timer = clock.setTimer(pollMs, check);
    });
  }
}
