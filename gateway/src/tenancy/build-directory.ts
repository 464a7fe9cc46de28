// The tenant directory from Kubernetes state, as plain data: Tenant objects
// and the digests of their keys (the gateway's keys Secret, which the operator
// keeps: lib/api/gateway-keys.ts) in, key hash → tenant out, with the reason
// for every tenant or key left out. No I/O.
//
// Rules:
// - A Tenant is validated with the API's schema; an invalid one is left out.
// - Its Secret is `spec.apiKeys.secretRef` in the Tenant's namespace; the
//   operator reflects only Secrets labelled API_KEYS_LABEL: an unlabelled
//   Secret is reported as not found, with the label to add.
// - Every entry of the Secret's data is a key; one shorter than
//   MIN_API_KEY_LENGTH is refused (a guessable bearer secret).
// - A key found in two tenants' Secrets belongs to neither: the gateway cannot
//   tell who is calling, and guessing would bill or isolate the wrong tenant.

import { API_KEYS_LABEL, MIN_API_KEY_LENGTH, validateResource } from '#api';
import type { ApiKeyDigests } from '#api/gateway-keys.ts';
import type { BuiltDirectory, Tenant, TenantIssue } from './tenant.ts';

export interface DirectoryInput {
  /** Tenant objects as the informer holds them (unvalidated). */
  readonly tenants: readonly unknown[];
  /** namespace/name of each key Secret → entry → the key's digest (from the kept Secret). */
  readonly keyDigests: ApiKeyDigests;
  /** Why the kept Secret gave nothing, added to each missing Secret's reason; undefined when read. */
  readonly keysSecretProblem?: string | undefined;
}

export function buildTenantDirectory(input: DirectoryInput): BuiltDirectory {
  const issues: TenantIssue[] = [];
  const owners = new Map<string, Tenant[]>();
  const tenants: Tenant[] = [];
  for (const obj of input.tenants) {
    const r = validateResource(obj);
    if (!r.ok || r.value.kind !== 'Tenant') continue;
    const t = r.value;
    const namespace = t.metadata.namespace ?? '';
    const tenant: Tenant = {
      id: `${namespace}/${t.metadata.name ?? ''}`,
      deployments: new Set(t.spec.models.map((m) => `${namespace}/${m}`)),
      limits: t.spec.limits,
      priority: t.spec.priority,
    };
    tenants.push(tenant);
    const secretName = t.spec.apiKeys.secretRef.name;
    const data = Object.hasOwn(input.keyDigests, `${namespace}/${secretName}`)
      ? input.keyDigests[`${namespace}/${secretName}`]
      : undefined;
    if (!data) {
      issues.push({
        tenant: tenant.id,
        code: 'SecretNotFound',
        message: `Secret ${namespace}/${secretName} not found, or not labelled ${API_KEYS_LABEL}: "true" (the operator passes the gateway only labelled Secrets a Tenant names)${input.keysSecretProblem ? `; ${input.keysSecretProblem}` : ''}`,
      });
      continue;
    }
    let keys = 0;
    for (const [name, digest] of Object.entries(data)) {
      if (digest.length < MIN_API_KEY_LENGTH) {
        issues.push({
          tenant: tenant.id,
          code: 'KeyTooShort',
          message: `key ${JSON.stringify(name)} in Secret ${namespace}/${secretName} has ${digest.length} characters; use at least ${MIN_API_KEY_LENGTH} (e.g. openssl rand -hex 24)`,
        });
        continue;
      }
      const hash = digest.sha256;
      const list = owners.get(hash) ?? [];
      if (!list.includes(tenant)) list.push(tenant);
      owners.set(hash, list);
      keys++;
    }
    if (keys === 0 && Object.keys(data).length === 0)
      issues.push({
        tenant: tenant.id,
        code: 'NoKeys',
        message: `Secret ${namespace}/${secretName} holds no keys: add one data entry per API key`,
      });
  }
  const byHash = new Map<string, Tenant>();
  for (const [hash, list] of owners) {
    const [only] = list;
    if (list.length === 1 && only) {
      byHash.set(hash, only);
      continue;
    }
    for (const t of list)
      issues.push({
        tenant: t.id,
        code: 'KeyShared',
        message: `a key of this tenant is also a key of ${list
          .filter((o) => o !== t)
          .map((o) => o.id)
          .join(', ')}: it is refused for all of them; give each tenant its own keys`,
      });
  }
  tenants.sort((a, b) => a.id.localeCompare(b.id));
  return { byHash, tenants, issues };
}
