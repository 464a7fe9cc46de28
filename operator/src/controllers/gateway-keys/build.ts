// What the gateway needs from the Secrets of the namespaces it serves, as the
// one Secret the operator keeps for it (lib/api/gateway-keys.ts, ADR 0027).
// Pure: Tenants and two sets of Secrets in, the kept Secret's data out.
//
// Rules:
// - A Tenant key Secret is reflected only when a valid Tenant of its namespace
//   names it (spec.apiKeys.secretRef) and it carries cacheroute.dev/api-keys=true
//   (the operator's informer sees no other): a labelled Secret no Tenant names
//   stays in its namespace. Each entry becomes the sha256 and the length of the
//   key (trimmed, as the gateway always read it); the key stays where it is.
// - A runtime key Secret counts only under the name the operator gives its
//   Deployment's (anyone who may create Secrets there can label one), as the
//   gateway held it before.
// The gateway still judges the keys (too short, shared, missing): the rules
// stay in one place (gateway/src/tenancy/build-directory.ts).

import type { V1Secret } from '@kubernetes/client-node';
import { z } from 'zod';
import { buildRuntimeKeySecretName, DEPLOYMENT_LABEL, validateResource } from '#api';
import {
  GATEWAY_KEYS_DATA,
  GATEWAY_KEYS_LABEL,
  digestApiKey,
  type ApiKeyDigests,
  type RuntimeKeyTable,
  type SecretLocation,
} from '#api/gateway-keys.ts';
import { readRuntimeKeys } from '#api/runtime-key.ts';

const SecretView = z.looseObject({
  metadata: z.looseObject({
    name: z.string(),
    namespace: z.string(),
    labels: z.record(z.string(), z.string()).optional(),
    deletionTimestamp: z.string().optional(),
  }),
  data: z.record(z.string(), z.string()).optional(),
});
type SecretView = z.infer<typeof SecretView>;

export interface GatewayKeysInput {
  /** Tenant objects as the informer holds them (unvalidated). */
  readonly tenants: readonly unknown[];
  /** Secrets labelled cacheroute.dev/api-keys=true. */
  readonly apiKeySecrets: readonly unknown[];
  /** Secrets labelled cacheroute.dev/runtime-api-key=true. */
  readonly runtimeKeySecrets: readonly unknown[];
}

export interface GatewayKeys {
  readonly apiKeyDigests: ApiKeyDigests;
  readonly runtimeKeys: RuntimeKeyTable;
}

function parseSecrets(objects: readonly unknown[]): SecretView[] {
  return objects.flatMap((o) => {
    const s = SecretView.safeParse(o);
    return s.success && !s.data.metadata.deletionTimestamp ? [s.data] : [];
  });
}

export function buildGatewayKeys(input: GatewayKeysInput): GatewayKeys {
  const named = new Set<string>();
  for (const obj of input.tenants) {
    const r = validateResource(obj);
    if (r.ok && r.value.kind === 'Tenant')
      named.add(`${r.value.metadata.namespace ?? ''}/${r.value.spec.apiKeys.secretRef.name}`);
  }
  const apiKeyDigests: Record<string, ApiKeyDigests[string]> = {};
  for (const s of parseSecrets(input.apiKeySecrets)) {
    const where = `${s.metadata.namespace}/${s.metadata.name}`;
    if (!named.has(where)) continue;
    apiKeyDigests[where] = sortKeys(
      Object.fromEntries(
        Object.entries(s.data ?? {}).map(([entry, b64]) => [
          entry,
          digestApiKey(Buffer.from(b64, 'base64').toString('utf8')),
        ]),
      ),
    );
  }
  const runtimeKeys: Record<string, RuntimeKeyTable[string]> = {};
  for (const s of parseSecrets(input.runtimeKeySecrets)) {
    const deployment = s.metadata.labels?.[DEPLOYMENT_LABEL];
    if (!deployment || s.metadata.name !== buildRuntimeKeySecretName(deployment)) continue;
    runtimeKeys[`${s.metadata.namespace}/${deployment}`] = sortKeys(readRuntimeKeys(s));
  }
  return { apiKeyDigests: sortKeys(apiKeyDigests), runtimeKeys: sortKeys(runtimeKeys) };
}

/** Sorted, so that equal contents serialize equally and an unchanged Secret is not written. */
function sortKeys<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}

/** The kept Secret, for server-side apply; data base64-encoded, as the API stores it. */
export function buildGatewayKeysSecret(where: SecretLocation, keys: GatewayKeys): V1Secret {
  const encode = (doc: unknown): string => Buffer.from(JSON.stringify(doc)).toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: where.name,
      namespace: where.namespace,
      // Not app.kubernetes.io/managed-by: the chart makes this Secret and labels it so (Helm's).
      labels: { [GATEWAY_KEYS_LABEL]: 'true' },
    },
    type: 'Opaque',
    data: {
      [GATEWAY_KEYS_DATA.apiKeyDigests]: encode(keys.apiKeyDigests),
      [GATEWAY_KEYS_DATA.runtimeKeys]: encode(keys.runtimeKeys),
    },
  };
}
