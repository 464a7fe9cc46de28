// The tenant behind a request's API key, or 401: the first thing an API
// route does in keys mode, before the body is read for routing.

import type { IncomingHttpHeaders } from 'node:http';
import { GatewayError } from '../errors/index.ts';
import { readPresentedKey } from './credentials.ts';
import { hashApiKey, type Tenant, type TenantDirectory } from './tenant.ts';

export function authenticate(
  directory: TenantDirectory,
  headers: Readonly<IncomingHttpHeaders>,
  rawHeaders: readonly string[] = [],
): Tenant {
  const presented = readPresentedKey(headers, rawHeaders);
  if (!presented.ok) throw new GatewayError('GW_UNAUTHORIZED', { detail: presented.reason });
  const tenant = directory.byKeyHash(hashApiKey(presented.key));
  if (!tenant)
    throw new GatewayError('GW_UNAUTHORIZED', {
      detail: directory.ready
        ? 'the key belongs to no Tenant (check the Tenant and its Secret on the admin /status)'
        : 'this gateway replica has not read the Tenants yet; retry in a few seconds',
    });
  return tenant;
}
