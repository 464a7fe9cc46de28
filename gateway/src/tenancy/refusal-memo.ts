// A tenant refused by its rate limit is refused again, until the Retry-After
// it was given, before its next request's body is read, parsed or tokenized:
// a tenant over its limit cannot make the gateway parse 64 MiB bodies for
// nothing. Wraps the limiter that counts (memory or Redis): it remembers each
// tenant's last refusal of every request (a limit with nothing left) and
// forgets it at the first admission. A tenant the memo refuses is not counted, as the limiter does not count a refusal; the
// memo may refuse up to the second Retry-After rounds to, never longer.
// One entry per tenant that was refused: bounded by the tenants declared.

import type { Clock } from '#kube/clock.ts';
import type { RateLimiter } from './limiter.ts';
import type { LimitDecision, RateCost } from './rate-window.ts';
import type { Tenant } from './tenant.ts';

type Refusal = Extract<LimitDecision, { allowed: false }>;

export class RefusalMemoLimiter implements RateLimiter {
  readonly #inner: RateLimiter;
  readonly #clock: Clock;
  readonly #refused = new Map<string, { readonly until: number; readonly decision: Refusal }>();

  constructor(inner: RateLimiter, clock: Clock) {
    this.#inner = inner;
    this.#clock = clock;
  }

  async admit(tenant: Tenant, cost: RateCost): Promise<LimitDecision> {
    const decision = await this.#inner.admit(tenant, cost);
    if (decision.allowed) this.#refused.delete(tenant.id);
    // A batch refused for its size may leave room for a smaller request: only a limit with
    // nothing left refuses every request, and only that is remembered.
    else if ((decision[decision.limited]?.remaining ?? 0) < 1)
      this.#refused.set(tenant.id, {
        until: this.#clock.now() + decision.retryAfterSeconds * 1000,
        decision,
      });
    return decision;
  }

  /** The tenant's last refusal while its Retry-After has not passed, with the seconds left; else undefined. */
  refusalOf(tenant: Tenant): Refusal | undefined {
    const r = this.#refused.get(tenant.id);
    if (!r) return undefined;
    const left = r.until - this.#clock.now();
    if (left <= 0) {
      this.#refused.delete(tenant.id);
      return undefined;
    }
    return { ...r.decision, retryAfterSeconds: Math.ceil(left / 1000) };
  }

  charge(tenant: Tenant, tokens: number): void {
    this.#inner.charge(tenant, tokens);
  }

  close(): Promise<void> {
    this.#refused.clear();
    return this.#inner.close();
  }
}
