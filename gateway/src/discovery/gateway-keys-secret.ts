// The Secret the operator keeps for the gateway (lib/api/gateway-keys.ts,
// ADR 0027), as the gateway reads it: one object, watched by name in one
// namespace (RBAC resourceNames), so the gateway holds no grant on the
// Secrets of the namespaces it serves. Pure: the informer's objects in, the
// two documents out, or why they could not be read (never a key).

import { z } from 'zod';
import { ApiKeyDigests, GATEWAY_KEYS_DATA, RuntimeKeyTable, type SecretLocation } from '#api/gateway-keys.ts';
import { Resources } from '#kube/resources.ts';
import type { WatchedKind } from './informer-group.ts';

const KeptSecret = z.looseObject({
  metadata: z.looseObject({ name: z.string(), namespace: z.string() }),
  data: z.record(z.string(), z.string()).optional(),
});

export interface KeptKeys {
  readonly apiKeyDigests: ApiKeyDigests;
  readonly runtimeKeys: RuntimeKeyTable;
  /** Why the Secret gave nothing (absent, or a document that does not parse); undefined when read. */
  readonly problem: string | undefined;
}

/** The watch on the kept Secret: its namespace only, its name only. */
export function watchKeptSecret(where: SecretLocation): WatchedKind {
  return {
    resource: Resources.secrets,
    namespace: where.namespace,
    fieldSelector: `metadata.name=${where.name}`,
  };
}

export function readKeptKeys(objects: readonly unknown[], where: SecretLocation): KeptKeys {
  const name = `${where.namespace}/${where.name}`;
  const empty = (problem: string): KeptKeys => ({ apiKeyDigests: {}, runtimeKeys: {}, problem });
  const found = objects
    .map((o) => KeptSecret.safeParse(o))
    .find(
      (s) =>
        s.success && s.data.metadata.namespace === where.namespace && s.data.metadata.name === where.name,
    );
  if (!found?.success)
    return empty(
      `the gateway's keys Secret ${name} does not exist: the operator writes it when run with --gateway-keys-secret ${name}`,
    );
  const data = found.data.data ?? {};
  const doc = <T>(entry: string, schema: z.ZodType<T>): { ok: true; value: T } | { ok: false } => {
    const raw = data[entry];
    if (raw === undefined) return { ok: false };
    try {
      const parsed = schema.safeParse(JSON.parse(Buffer.from(raw, 'base64').toString('utf8')));
      return parsed.success ? { ok: true, value: parsed.data } : { ok: false };
    } catch {
      return { ok: false };
    }
  };
  const digests = doc(GATEWAY_KEYS_DATA.apiKeyDigests, ApiKeyDigests);
  const runtime = doc(GATEWAY_KEYS_DATA.runtimeKeys, RuntimeKeyTable);
  const unread = [
    ...(digests.ok ? [] : [GATEWAY_KEYS_DATA.apiKeyDigests]),
    ...(runtime.ok ? [] : [GATEWAY_KEYS_DATA.runtimeKeys]),
  ];
  return {
    apiKeyDigests: digests.ok ? digests.value : {},
    runtimeKeys: runtime.ok ? runtime.value : {},
    problem:
      unread.length === 0
        ? undefined
        : `the gateway's keys Secret ${name} has no readable ${unread.join(', ')}: it is the operator's to write; delete it and the operator writes it again`,
  };
}
