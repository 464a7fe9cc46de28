// A tenant over its rate limits gets 429 before it is queued; its figures go
// on every answer it gets (OpenAI's x-ratelimit-* headers). A request that
// alone is more requests than the tenant may send in a minute (a batch, or
// `n`) could never fit: 400, split it.

import { GatewayError } from '../errors/index.ts';
import type { GatewayMetrics } from '../metrics/index.ts';
import { applyLimitHeaders, toRateLimitError } from './limit-response.ts';
import type { RateLimiter } from './limiter.ts';
import type { RateCost } from './rate-window.ts';
import type { Tenant } from './tenant.ts';

export async function enforceTenantLimits(
  limiter: RateLimiter,
  metrics: GatewayMetrics,
  tenant: Tenant,
  cost: RateCost,
  setHeader: ((name: string, value: string) => void) | undefined,
): Promise<void> {
  const rpm = tenant.limits.requestsPerMinute;
  if (rpm !== undefined && cost.requests > rpm)
    throw new GatewayError('GW_REQUEST_TOO_LARGE', {
      subject: 'The request',
      value: `${cost.requests} requests (prompts x n)`,
      limit: `Tenant '${tenant.id}' limits.requestsPerMinute`,
      cap: rpm,
      advice: 'send it as smaller batches or with a smaller n',
    });
  const decision = await limiter.admit(tenant, cost);
  if (setHeader) applyLimitHeaders(decision, setHeader);
  if (decision.allowed) return;
  metrics.tenantRejections.inc({ tenant: tenant.id, limit: decision.limited });
  throw toRateLimitError(tenant, decision);
}
