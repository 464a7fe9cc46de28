// The SGLang runtimes' API keys, as the operator keeps them: one Secret per
// cacheroute Deployment, labelled cacheroute.dev/runtime-api-key=true, one
// entry per identity fingerprint (lib/api/runtime-api-key.ts). Pure:
// Secrets in, a directory (deployment, fingerprint) → key out, with the
// Secrets left out and why. A Secret counts only under the name the operator
// gives its Deployment's: a labelled Secret of another name (anyone who may
// create Secrets there can label one) never decides what a runtime is sent.
// Keys stay here: issues name Secrets, never a value.

import { z } from 'zod';
import { buildRuntimeKeySecretName, DEPLOYMENT_LABEL } from '#api';
import { readRuntimeKeys } from '#api/runtime-key.ts';

const RuntimeKeySecret = z.looseObject({
  metadata: z.looseObject({
    name: z.string(),
    namespace: z.string(),
    labels: z.record(z.string(), z.string()).optional(),
    deletionTimestamp: z.string().optional(),
  }),
  data: z.record(z.string(), z.string()).optional(),
});

export interface RuntimeKeyIssue {
  /** namespace/name of the Secret left out. */
  readonly secret: string;
  readonly reason: string;
}

export interface BuiltRuntimeKeys {
  /** namespace/name of the Deployment → fingerprint → key. */
  readonly keys: ReadonlyMap<string, ReadonlyMap<string, string>>;
  readonly issues: readonly RuntimeKeyIssue[];
}

export function buildRuntimeKeys(secrets: readonly unknown[]): BuiltRuntimeKeys {
  const keys = new Map<string, ReadonlyMap<string, string>>();
  const issues: RuntimeKeyIssue[] = [];
  for (const raw of secrets) {
    const parsed = RuntimeKeySecret.safeParse(raw);
    if (!parsed.success) continue; // not an object the API server would send: nothing to name
    const { metadata } = parsed.data;
    const where = `${metadata.namespace}/${metadata.name}`;
    const deployment = metadata.labels?.[DEPLOYMENT_LABEL];
    if (!deployment) {
      issues.push({ secret: where, reason: `no ${DEPLOYMENT_LABEL} label` });
      continue;
    }
    if (metadata.name !== buildRuntimeKeySecretName(deployment)) {
      issues.push({
        secret: where,
        reason: `not the key Secret of Deployment ${deployment} (${buildRuntimeKeySecretName(deployment)})`,
      });
      continue;
    }
    keys.set(`${metadata.namespace}/${deployment}`, new Map(Object.entries(readRuntimeKeys(parsed.data))));
  }
  return { keys, issues };
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
