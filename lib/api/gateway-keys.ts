// The one Secret the operator keeps for the gateway (ADR 0027): in the
// gateway's own namespace, read by name, so the gateway needs no grant on the
// Secrets of the namespaces it serves. Two JSON documents:
//   - api-key-digests.json: for each Tenant key Secret a Tenant names
//     (namespace/name, labelled cacheroute.dev/api-keys=true), each entry's
//     sha256 and length. The gateway only compares (it hashes what a client
//     presents), so the keys themselves never leave the Tenant's namespace;
//     the length lets it refuse a key too short to be one, as it did.
//   - runtime-keys.json: each Deployment's runtime API keys (namespace/name →
//     fingerprint → key), in clear: the gateway sends them to the runtimes.
// The contract between the two programs; both parse with these schemas.

import { createHash } from 'node:crypto';
import { z } from 'zod';

export const GATEWAY_KEYS_DATA = {
  apiKeyDigests: 'api-key-digests.json',
  runtimeKeys: 'runtime-keys.json',
} as const;

/** Labels the kept Secret carries (who made it; nothing selects by them). */
export const GATEWAY_KEYS_LABEL = 'cacheroute.dev/gateway-keys';

export const ApiKeyDigest = z.object({
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  length: z.number().int().nonnegative(),
});
export type ApiKeyDigest = z.infer<typeof ApiKeyDigest>;

/** namespace/name of a key Secret → its data entry's name → the digest of the key it holds. */
export const ApiKeyDigests = z.record(z.string(), z.record(z.string(), ApiKeyDigest));
export type ApiKeyDigests = z.infer<typeof ApiKeyDigests>;

/** namespace/name of a Deployment → identity fingerprint → runtime API key. */
export const RuntimeKeyTable = z.record(z.string(), z.record(z.string(), z.string()));
export type RuntimeKeyTable = z.infer<typeof RuntimeKeyTable>;

/** Where the kept Secret is: `namespace/name` (the operator's --gateway-keys-secret). */
export interface SecretLocation {
  readonly namespace: string;
  readonly name: string;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/**
 * `namespace/name`, or a bare `name` in `defaultNamespace` (the gateway's own, from
 * --pod-namespace); an error says what to write.
 */
export function parseSecretLocation(
  value: string,
  defaultNamespace?: string,
): { ok: true; value: SecretLocation } | { ok: false; error: string } {
  const parts = value.split('/');
  const [namespace, name] = parts.length === 2 ? parts : [defaultNamespace, parts[0]];
  if (parts.length > 2 || namespace === undefined || name === undefined)
    return {
      ok: false,
      error: `${JSON.stringify(value)}: give namespace/name${defaultNamespace === undefined ? '' : ' or a name in the pod namespace'}`,
    };
  if (!DNS_LABEL.test(namespace) || namespace.length > 63)
    return { ok: false, error: `${JSON.stringify(namespace)} is not a namespace name` };
  if (!DNS_SUBDOMAIN.test(name) || name.length > 253)
    return { ok: false, error: `${JSON.stringify(name)} is not a Secret name` };
  return { ok: true, value: { namespace, name } };
}

/** The digest both programs compare: sha256 of the key as the client sends it, in hex. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** What the gateway is told of one key: its digest and length (surrounding whitespace is not the key's). */
export function digestApiKey(key: string): ApiKeyDigest {
  const trimmed = key.trim();
  return { sha256: hashApiKey(trimmed), length: trimmed.length };
}
