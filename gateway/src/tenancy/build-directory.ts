// The tenant directory from Kubernetes state, as plain data: Tenant objects
// and the labelled key Secrets of the watched namespaces in, key hash → tenant
// out, with the reason for every tenant or key left out. No I/O.
//
// Rules:
// - A Tenant is validated with the API's schema; an invalid one is left out.
// - Its Secret is `spec.apiKeys.secretRef` in the Tenant's namespace, and the
//   watch sees only Secrets labelled API_KEYS_LABEL: an unlabelled Secret is
//   reported as not found, with the label to add.
// - Every value of the Secret's data is a key; one shorter than
//   MIN_API_KEY_LENGTH is refused (a guessable bearer secret).
// - A key found in two tenants' Secrets belongs to neither: the gateway cannot
//   tell who is calling, and guessing would bill or isolate the wrong tenant.

import { z } from 'zod';
import { API_KEYS_LABEL, MIN_API_KEY_LENGTH, validateResource } from '#api';
import { hashApiKey, type BuiltDirectory, type Tenant, type TenantIssue } from './tenant.ts';

export interface DirectoryInput {
  /** Tenant objects as the informer holds them (unvalidated). */
  readonly tenants: readonly unknown[];
  /** Secrets labelled API_KEYS_LABEL (unvalidated). */
  readonly secrets: readonly unknown[];
}

const KeySecret = z.object({
  metadata: z.object({ namespace: z.string(), name: z.string() }),
  data: z.record(z.string(), z.string()).optional(),
});

export function buildTenantDirectory(input: DirectoryInput): BuiltDirectory {
  const issues: TenantIssue[] = [];
  const secrets = new Map<string, Readonly<Record<string, string>>>();
  for (const obj of input.secrets) {
    const s = KeySecret.safeParse(obj);
    if (s.success) secrets.set(`${s.data.metadata.namespace}/${s.data.metadata.name}`, s.data.data ?? {});
  }
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
    const data = secrets.get(`${namespace}/${secretName}`);
    if (!data) {
      issues.push({
        tenant: tenant.id,
        code: 'SecretNotFound',
        message: `Secret ${namespace}/${secretName} not found, or not labelled ${API_KEYS_LABEL}: "true" (the gateway reads only labelled Secrets)`,
      });
      continue;
    }
    let keys = 0;
    for (const [name, b64] of Object.entries(data)) {
      const key = Buffer.from(b64, 'base64').toString('utf8').trim();
      if (key.length < MIN_API_KEY_LENGTH) {
        issues.push({
          tenant: tenant.id,
          code: 'KeyTooShort',
          message: `key ${JSON.stringify(name)} in Secret ${namespace}/${secretName} has ${key.length} characters; use at least ${MIN_API_KEY_LENGTH} (e.g. openssl rand -hex 24)`,
        });
        continue;
      }
      const hash = hashApiKey(key);
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
