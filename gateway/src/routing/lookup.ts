// Which Deployment serves a request: the served name from the body (or the
// x-cacheroute-model header, or the only name there is), narrowed to what the
// tenant may use, then by weight when the name is split across identities.
// A served name belongs to its namespace (issue 30): when Deployments of more
// than one namespace serve it, a tenant reaches only its own namespace's
// (Tenant.deployments never leaves it) and an open gateway, which knows no
// caller, refuses to guess: the client names the namespace
// (x-cacheroute-namespace), so no namespace receives another's prompts.

import { GatewayError } from '../errors/index.ts';
import type { ParsedBody } from '../request/shape.ts';
import type { Tenant } from '../tenancy/tenant.ts';
import { chooseWeighted } from './split.ts';
import { namespaceOf, type ModelRoute, type RoutingTable } from './table.ts';

type Headers = Readonly<Record<string, string | string[] | undefined>>;

export function chooseRoute(
  table: RoutingTable,
  parsed: ParsedBody,
  headers: Headers,
  tenant: Tenant | undefined,
): ModelRoute {
  const header = headers['x-cacheroute-model'];
  const routes = table.list();
  const model =
    parsed.body.model ??
    (typeof header === 'string' ? header : undefined) ??
    (routes.length > 0 && routes.every((r) => r.model === routes[0]?.model) ? routes[0]?.model : undefined);
  if (model === undefined)
    throw new GatewayError('GW_BAD_REQUEST', {
      detail: 'model: name the model (body field `model` or header x-cacheroute-model)',
    });
  const all = table.candidates(model);
  const first = all[0];
  if (!first) throw new GatewayError('GW_MODEL_NOT_FOUND', { model });
  const allowed = tenant
    ? all.filter((r) => tenant.deployments.has(r.deployment))
    : keepNamedNamespace(all, model, headers);
  const route = chooseWeighted(allowed, readSessionKey(parsed, headers));
  if (route) return route;
  throw new GatewayError('GW_MODEL_FORBIDDEN', {
    tenant: tenant?.id ?? '',
    model,
    deployment: all.map((r) => r.deployment).join(', '),
  });
}

/** Without a tenant: the one namespace serving the name, or the one the client names. */
function keepNamedNamespace(all: readonly ModelRoute[], model: string, headers: Headers): ModelRoute[] {
  const header = headers['x-cacheroute-namespace'];
  if (typeof header === 'string' && header !== '') {
    const named = all.filter((r) => namespaceOf(r) === header);
    if (named.length === 0) throw new GatewayError('GW_MODEL_NOT_FOUND', { model });
    return named;
  }
  const namespaces = [...new Set(all.map(namespaceOf))];
  if (namespaces.length > 1)
    throw new GatewayError('GW_MODEL_AMBIGUOUS', { model, namespaces: namespaces.sort().join(', ') });
  return [...all];
}

/** What keeps a client on one identity of a split: OpenAI's `user`, or x-cacheroute-session. */
function readSessionKey(parsed: ParsedBody, headers: Headers): string | undefined {
  const user = (parsed.body as { user?: unknown }).user;
  if (typeof user === 'string' && user !== '') return user;
  const header = headers['x-cacheroute-session'];
  return typeof header === 'string' && header !== '' ? header : undefined;
}
