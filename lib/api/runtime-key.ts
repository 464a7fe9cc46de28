// A Deployment's SGLang API keys as its Secret holds them (one per identity
// fingerprint, api/runtime-api-key.ts), and how a call to a runtime carries
// one: `Authorization: Bearer <key>`, as SGLang's middleware reads it. Keys
// never go into errors, logs, status or events: callers pass them only here.
import { buildRuntimeKeySecretName } from './index.ts';

/** A Secret as the API server sends it: values base64-encoded. */
export interface SecretData {
  readonly data?: Readonly<Record<string, string>> | undefined;
}

/** fingerprint → key, decoded; an empty entry is no key. */
export function readRuntimeKeys(secret: SecretData | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [fingerprint, encoded] of Object.entries(secret?.data ?? {})) {
    const key = Buffer.from(encoded, 'base64').toString('utf8');
    if (key !== '') out[fingerprint] = key;
  }
  return out;
}

/** The key of one runtime: its Deployment's namespace and name, and the fingerprint it runs. */
export type RuntimeKeyLookup = (
  namespace: string,
  deployment: string,
  fingerprint: string,
) => string | undefined;

/** Looks keys up in a cache of runtime key Secrets (the operator's informer). */
export function buildRuntimeKeyLookup(secrets: {
  get(namespace: string, name: string): SecretData | undefined;
}): RuntimeKeyLookup {
  return (namespace, deployment, fingerprint) =>
    readRuntimeKeys(secrets.get(namespace, buildRuntimeKeySecretName(deployment)))[fingerprint];
}

/** The header a call to a runtime started with `--api-key` needs; none without a key. */
export function buildRuntimeAuthHeaders(key: string | undefined): Record<string, string> {
  return key ? { authorization: `Bearer ${key}` } : {};
}
