// The API routes' first step in keys mode, before the body is read: the
// caller's tenant from its key (401 without), and on generation routes a
// tenant still inside a rate-limit refusal is refused again (429) there,
// before its body is parsed or tokenized (refusal-memo.ts).

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayMetrics } from '../metrics/index.ts';
import { authenticate } from './authenticate.ts';
import { applyLimitHeaders, toRateLimitError } from './limit-response.ts';
import type { RefusalMemoLimiter } from './refusal-memo.ts';
import type { TenantDirectory } from './tenant.ts';

type OnRequest = (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => void;

/** Sets the request's tenant, or answers 401; with `limits`, a refused tenant gets its 429 here. */
export function buildAuthenticateHook(
  tenants: TenantDirectory,
  limits?: { readonly memo: RefusalMemoLimiter; readonly metrics: GatewayMetrics },
): OnRequest {
  return (req, reply, done) => {
    try {
      const tenant = authenticate(tenants, req.headers, req.raw.rawHeaders);
      req.tenant = tenant;
      const refused = limits?.memo.refusalOf(tenant);
      if (limits && refused) {
        applyLimitHeaders(refused, (name, value) => void reply.header(name, value));
        limits.metrics.tenantRejections.inc({ tenant: tenant.id, limit: refused.limited });
        done(toRateLimitError(tenant, refused));
        return;
      }
      done();
    } catch (err) {
      done(err as Error);
    }
  };
}
