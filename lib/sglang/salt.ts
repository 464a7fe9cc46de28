import { createHash } from 'node:crypto';

/**
 * SGLang's `cache_salt` for a cache namespace on one deployment. It separates
 * radix-cache keys (different salts never share KV); it grants no access. The
 * deploymentId is hashed in so that the same namespace on a new identity never
 * meets KV computed by the old one.
 */
export function computeCacheSalt(cacheNamespace: string, deploymentId: string): string {
  return createHash('sha256')
    .update(`cacheroute/v1\0${cacheNamespace}\0${deploymentId}`)
    .digest('hex')
    .slice(0, 32);
}

/**
 * A client's own salt narrows the namespace further but can never leave it: the
 * result always starts with the policy's salt.
 */
export function combineCacheSalt(policySalt: string, clientSalt: string | undefined): string {
  if (clientSalt === undefined || clientSalt === '') return policySalt;
  return `${policySalt}.${createHash('sha256').update(clientSalt).digest('hex').slice(0, 16)}`;
}

/**
 * A tenant's part of the salt: tenants of one CachePolicy never share KV (nor reused
 * results, keyed by salt) unless the policy says they may (spec.tenancy.sharePrefixes).
 */
export function computeTenantSalt(policySalt: string, tenantId: string): string {
  return `${policySalt}.t${readTenantPart(tenantId)}`;
}

// The gateway derives a tenant's salt on every request of that tenant: each tenant's part is
// hashed once (tenants are few; past the bound the memo starts again).
const MAX_TENANT_PARTS = 4096;
const tenantParts = new Map<string, string>();

function readTenantPart(tenantId: string): string {
  let part = tenantParts.get(tenantId);
  if (part === undefined) {
    if (tenantParts.size >= MAX_TENANT_PARTS) tenantParts.clear();
    part = createHash('sha256').update(`tenant\0${tenantId}`).digest('hex').slice(0, 16);
    tenantParts.set(tenantId, part);
  }
  return part;
}
