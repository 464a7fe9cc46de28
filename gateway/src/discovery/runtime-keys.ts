// The SGLang runtimes' API keys, as the operator passes them to the gateway:
// the runtime-keys.json document of the Secret it keeps for the gateway
// (lib/api/gateway-keys.ts), Deployment → fingerprint → key. The operator
// takes a Deployment's keys only from the Secret of the name it gives that
// Deployment (operator/src/controllers/gateway-keys/build.ts). Keys stay
// here: issues name Secrets, never a value.

import type { RuntimeKeyTable, SecretLocation } from '#api/gateway-keys.ts';

export interface RuntimeKeyIssue {
  /** namespace/name of the Secret that gave no keys. */
  readonly secret: string;
  readonly reason: string;
}

export interface BuiltRuntimeKeys {
  /** namespace/name of the Deployment → fingerprint → key. */
  readonly keys: ReadonlyMap<string, ReadonlyMap<string, string>>;
  readonly issues: readonly RuntimeKeyIssue[];
}

/** `problem`: why the kept Secret gave nothing (readKeptKeys), reported as an issue. */
export function buildRuntimeKeys(
  table: RuntimeKeyTable,
  problem?: string,
  where?: SecretLocation,
): BuiltRuntimeKeys {
  const keys = new Map<string, ReadonlyMap<string, string>>();
  for (const [deployment, byFingerprint] of Object.entries(table))
    keys.set(deployment, new Map(Object.entries(byFingerprint).filter(([, key]) => key !== '')));
  const secret = where ? `${where.namespace}/${where.name}` : '';
  return { keys, issues: problem === undefined ? [] : [{ secret, reason: problem }] };
}

/** What the upstream side asks: the key of one runtime, if its Deployment has one. */
export interface RuntimeKeyDirectory {
  /** `deployment` is namespace/name, as ModelRoute.deployment. */
  keyFor(deployment: string, fingerprint: string): string | undefined;
  /** True once the keys reflect the cluster (for /readyz: before, runtimes would refuse every request). */
  readonly ready: boolean;
}

export class RuntimeKeys implements RuntimeKeyDirectory {
  ready = false;
  #keys: ReadonlyMap<string, ReadonlyMap<string, string>> = new Map();

  replace(built: BuiltRuntimeKeys): void {
    this.#keys = built.keys;
  }

  keyFor(deployment: string, fingerprint: string): string | undefined {
    return this.#keys.get(deployment)?.get(fingerprint);
  }

  /** How many Deployments have keys (for the log: never the keys). */
  get deployments(): number {
    return this.#keys.size;
  }
}
