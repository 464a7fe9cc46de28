// A rate decision as the client sees it: OpenAI's x-ratelimit-* headers on
// every answer to a limited tenant, and the 429 that names the limit.

import { GatewayError } from '../errors/index.ts';
import type { LimitDecision, LimitState } from './rate-window.ts';
import type { Tenant } from './tenant.ts';

export const LIMITED_HEADER = 'x-ratelimit-limited';

export function applyLimitHeaders(d: LimitDecision, set: (name: string, value: string) => void): void {
  const put = (name: 'requests' | 'tokens', s: LimitState | undefined): void => {
    if (!s) return;
    set(`x-ratelimit-limit-${name}`, String(s.limit));
    set(`x-ratelimit-remaining-${name}`, String(s.remaining));
  };
  put('requests', d.requests);
  put('tokens', d.tokens);
  if (!d.allowed) {
    set(LIMITED_HEADER, d.limited);
    set(`x-ratelimit-reset-${d.limited}`, `${d.retryAfterSeconds}s`);
  }
}

export function toRateLimitError(
  tenant: Tenant,
  d: Extract<LimitDecision, { allowed: false }>,
): GatewayError {
  const value = d.limited === 'requests' ? tenant.limits.requestsPerMinute : tenant.limits.tokensPerMinute;
  return new GatewayError(
    'GW_RATE_LIMITED',
    {
      tenant: tenant.id,
      limit: d.limited === 'requests' ? 'requestsPerMinute' : 'tokensPerMinute',
      value: value ?? 0,
      retryAfterSeconds: d.retryAfterSeconds,
    },
    { retryAfterSeconds: d.retryAfterSeconds },
  );
}
