// Where a tenant's rate counts live. In memory, each replica counts only what
// it served, so it enforces its share of each limit (the tier's members
// divide it as they divide admission bounds, fleet/share.ts); in Redis every
// replica counts into the same windows and enforces the whole limit.

import type { TenantLimits } from '#api';
import type { Clock } from '#kube/clock.ts';
import {
  describeDecision,
  fitsLimits,
  windowFractionAt,
  windowIndexAt,
  type LimitDecision,
  type RateCost,
} from './rate-window.ts';
import type { Tenant } from './tenant.ts';

export interface RateLimiter {
  /** Counts a request's cost (its requests and prompt tokens) when it fits the tenant's limits. */
  admit(tenant: Tenant, cost: RateCost): Promise<LimitDecision>;
  /** Counts tokens known after the answer (completion tokens). */
  charge(tenant: Tenant, tokens: number): void;
  close(): Promise<void>;
}

interface Windows {
  index: number;
  requests: { current: number; previous: number };
  tokens: { current: number; previous: number };
}

export class MemoryRateLimiter implements RateLimiter {
  readonly #clock: Clock;
  readonly #share: (total: number) => number;
  readonly #windows = new Map<string, Windows>();

  /** `share`: this replica's part of a tier-wide limit (identity when it is alone). */
  constructor(clock: Clock, share: (total: number) => number = (t) => t) {
    this.#clock = clock;
    this.#share = share;
  }

  admit(tenant: Tenant, cost: RateCost): Promise<LimitDecision> {
    const now = this.#clock.now();
    const w = this.#advance(tenant.id, now);
    const limits = this.#shareOf(tenant.limits);
    const fraction = windowFractionAt(now);
    const refused = fitsLimits(w, limits, fraction, cost.requests);
    const decision = describeDecision(w, limits, fraction, cost, refused);
    if (refused === undefined) {
      w.requests.current += cost.requests;
      w.tokens.current += cost.tokens;
    }
    return Promise.resolve(decision);
  }

  charge(tenant: Tenant, tokens: number): void {
    this.#advance(tenant.id, this.#clock.now()).tokens.current += tokens;
  }

  close(): Promise<void> {
    this.#windows.clear();
    return Promise.resolve();
  }

  #shareOf(limits: TenantLimits): TenantLimits {
    const { requestsPerMinute: rpm, tokensPerMinute: tpm } = limits;
    return {
      ...(rpm !== undefined ? { requestsPerMinute: this.#share(rpm) } : {}),
      ...(tpm !== undefined ? { tokensPerMinute: this.#share(tpm) } : {}),
    };
  }

  /** The tenant's windows moved to `now`'s: a window left behind becomes the previous, or is gone. */
  #advance(id: string, now: number): Windows {
    const index = windowIndexAt(now);
    let w = this.#windows.get(id);
    if (!w) {
      w = { index, requests: { current: 0, previous: 0 }, tokens: { current: 0, previous: 0 } };
      this.#windows.set(id, w);
    }
    if (w.index !== index) {
      const adjacent = w.index === index - 1;
      w.requests = { current: 0, previous: adjacent ? w.requests.current : 0 };
      w.tokens = { current: 0, previous: adjacent ? w.tokens.current : 0 };
      w.index = index;
    }
    return w;
  }
}
