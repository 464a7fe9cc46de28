// Each Deployment's SGLang API keys: one per identity fingerprint, in one
// owned Secret (api/runtime-api-key.ts). A pod reads the key of its own
// fingerprint at start (secretKeyRef) and SGLang refuses every request
// without it; the operator and the gateway look it up by the fingerprint the
// pod reports.
//
// Rotation follows identity. A new fingerprint gets a new key; a fingerprint
// keeps its key while any pod of it remains (terminating ones too: they serve
// through their preStop sleep) and while the status last written still lists
// an endpoint of it, so a rollout never locks the gateway out of the pods it
// still routes to. A pod can go between two passes; the gateway reads the
// Secret and the status on separate watches, and a key dropped in the pass
// that also drops the endpoint from status could reach it first, leaving it
// an endpoint it routes to without the key (401). Once neither a pod nor the
// status holds a fingerprint, its key is dropped: one pass after the status
// stopped listing it (the status write queues that pass). Usually
// that is the current key and the previous one during a rollout; a second
// identity change before the first rollout ends keeps all three until their
// pods are gone. The key is not part of the fingerprint (no cycle): the pod
// template names it by fingerprint, never by value.
import type { V1Secret } from '@kubernetes/client-node';
import { buildRuntimeKeySecretName, RUNTIME_API_KEY_LABEL, type DeploymentResource } from '#api';
import { buildOwnedMetadata } from './meta/owned.ts';
import { LABEL_DEPLOYMENT, MANAGED_BY } from './meta/labels.ts';

export interface RuntimeKeyInputs {
  /** The fingerprint the spec renders now. */
  readonly current: string;
  /** fingerprint → key, as the Secret holds them now. */
  readonly existing: Readonly<Record<string, string>>;
  /** The fingerprints of the Deployment's pods, terminating ones included. */
  readonly podFingerprints: ReadonlySet<string>;
  /** The fingerprints of the endpoints the status last written lists (what gateways route to). */
  readonly listedFingerprints: ReadonlySet<string>;
}

export interface RuntimeKeyPlan {
  /** fingerprint → key: what the Secret should hold. */
  readonly keys: Readonly<Record<string, string>>;
  /** The fingerprint given a new key, if any (the shell reads the Secret live before it trusts that). */
  readonly added: string | undefined;
  /** Fingerprints whose key goes, sorted. */
  readonly dropped: readonly string[];
}

/** Pure: `generateKey` is the only source of new keys. */
export function planRuntimeKeys(input: RuntimeKeyInputs, generateKey: () => string): RuntimeKeyPlan {
  const keys: Record<string, string> = {};
  const dropped: string[] = [];
  for (const [fingerprint, key] of Object.entries(input.existing).sort(([a], [b]) => a.localeCompare(b))) {
    const inUse =
      fingerprint === input.current ||
      input.podFingerprints.has(fingerprint) ||
      input.listedFingerprints.has(fingerprint);
    if (inUse) keys[fingerprint] = key;
    else dropped.push(fingerprint);
  }
  const existingKey = keys[input.current];
  if (existingKey !== undefined) return { keys, added: undefined, dropped };
  return { keys: { ...keys, [input.current]: generateKey() }, added: input.current, dropped };
}

/** The Secret of a Deployment's keys; the data goes base64-encoded, as the API stores it. */
export function buildRuntimeKeySecret(
  root: DeploymentResource,
  keys: Readonly<Record<string, string>>,
): V1Secret {
  const name = root.metadata.name ?? '';
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: buildOwnedMetadata(root, buildRuntimeKeySecretName(name), {
      [RUNTIME_API_KEY_LABEL]: 'true',
      [LABEL_DEPLOYMENT]: name,
      'app.kubernetes.io/managed-by': MANAGED_BY,
    }),
    type: 'Opaque',
    data: Object.fromEntries(
      Object.entries(keys).map(([fingerprint, key]) => [fingerprint, Buffer.from(key).toString('base64')]),
    ),
  };
}
