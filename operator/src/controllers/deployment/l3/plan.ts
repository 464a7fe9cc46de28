// HiCache's L3 tier, shared by a role's replicas and outliving them. Backend `file` (ADR 0029): one
// ReadWriteMany volume that every replica mounts. Backend `mooncake` (ADR 0041, mooncake.ts): a
// Mooncake store the operator runs. Pure builders: what to claim or run, and what each pod adds.
import type { V1EnvVar, V1PersistentVolumeClaim, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import type { DeploymentResource, EndpointRole, HiCacheSpec, Profile } from '#api';
import type { z } from 'zod';
import { LABEL_DEPLOYMENT, MANAGED_BY } from '../meta/labels.ts';
import { buildWorkloadName } from '../meta/labels.ts';
import { buildOwnedMetadata } from '../meta/owned.ts';
import { buildMooncakeEnv, DEFAULT_MOONCAKE_IMAGE, planMooncake, type MooncakePlan } from './mooncake.ts';

/** What of an engine (roles.ts RoleEngine) its L3 tier depends on. */
export interface L3Engine {
  readonly role: EndpointRole;
  readonly profile: Profile;
  readonly hicache: z.infer<typeof HiCacheSpec> | undefined;
}

/** Marks the claims the operator makes for L3 (its informer selects them). */
export const LABEL_L3 = 'cacheroute.dev/hicache-l3';
export const DEFAULT_L3_SIZE = '100Gi';
export const L3_VOLUME = 'hicache-l3';
/** Where SGLang finds the shared directory in the container. */
export const L3_MOUNT = '/var/cache/cacheroute/hicache-l3';
/** SGLang's own setting of the file backend's directory (it wins over the extra config). */
export const FILE_DIR_ENV = 'SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR';

/** The L3 tier of one role: a claim and a directory in it (file), or a store (mooncake). */
export type L3Plan = FileL3Plan | MooncakePlan;

/** What the operator runs an L3 tier with. */
export interface L3Options {
  /** The image of the Mooncake store's processes (`--mooncake-image`). */
  readonly mooncakeImage?: string | undefined;
}

/** The file backend's tier: the claim its replicas share and the directory in it. */
export interface FileL3Plan {
  readonly role: EndpointRole;
  readonly backend: 'file';
  readonly claimName: string;
  /** The operator makes (and owns) the claim; else the user named it. */
  readonly managed: boolean;
  /**
   * The claim's subdirectory the replicas use: one per identity fingerprint. SGLang's file keys
   * are page hashes plus the served name and TP rank, not the weights nor the KV dtype, so a
   * rollout to other weights under the same served name would read stale KV from a shared root.
   */
  readonly directory: string;
  /** The claim to apply when managed. */
  readonly claim?: V1PersistentVolumeClaim;
}

export function buildL3ClaimName(deployment: string, role: EndpointRole): string {
  return `${buildWorkloadName(deployment, role)}-l3`;
}

export function buildL3Directory(fingerprint: string): string {
  return `kv/${fingerprint}`;
}

/** The L3 tiers a Deployment's engines declare: those with profile hicache and storage backend file or mooncake. */
export function planL3(
  root: DeploymentResource,
  engines: readonly L3Engine[],
  fingerprint: string,
  opts: L3Options = {},
): L3Plan[] {
  const name = root.metadata.name ?? '';
  return engines.flatMap((engine): L3Plan[] => {
    const storage = engine.profile === 'hicache' ? engine.hicache?.storage : undefined;
    if (storage?.backend === 'mooncake')
      return [
        planMooncake(
          root,
          engine.role,
          fingerprint,
          storage.mooncake?.capacity,
          opts.mooncakeImage ?? DEFAULT_MOONCAKE_IMAGE,
        ),
      ];
    if (storage?.backend !== 'file') return [];
    const volume = storage.volume;
    const directory = buildL3Directory(fingerprint);
    if (volume?.claimName !== undefined)
      return [{ role: engine.role, backend: 'file', claimName: volume.claimName, managed: false, directory }];
    const claimName = buildL3ClaimName(name, engine.role);
    const claim: V1PersistentVolumeClaim = {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: buildOwnedMetadata(root, claimName, {
        'app.kubernetes.io/name': 'hicache-l3',
        'app.kubernetes.io/part-of': 'cacheroute',
        'app.kubernetes.io/managed-by': MANAGED_BY,
        [LABEL_DEPLOYMENT]: name,
        [LABEL_L3]: engine.role,
      }),
      spec: {
        accessModes: ['ReadWriteMany'],
        resources: { requests: { storage: String(volume?.size ?? DEFAULT_L3_SIZE) } },
        ...(volume?.storageClassName ? { storageClassName: volume.storageClassName } : {}),
      },
    };
    return [{ role: engine.role, backend: 'file', claimName, managed: true, directory, claim }];
  });
}

/** What an engine's pods add for its L3 tier: the claim's volume, its mount, SGLang's directory setting. */
export interface L3PodParts {
  readonly volumes: V1Volume[];
  readonly mounts: V1VolumeMount[];
  readonly env: V1EnvVar[];
}

export function buildL3PodParts(plan: L3Plan | undefined): L3PodParts {
  if (!plan) return { volumes: [], mounts: [], env: [] };
  if (plan.backend === 'mooncake') return { volumes: [], mounts: [], env: buildMooncakeEnv(plan) };
  return {
    volumes: [{ name: L3_VOLUME, persistentVolumeClaim: { claimName: plan.claimName } }],
    // The kubelet makes the subdirectory: no two replicas race to create it.
    mounts: [{ name: L3_VOLUME, mountPath: L3_MOUNT, subPath: plan.directory }],
    env: [{ name: FILE_DIR_ENV, value: L3_MOUNT }],
  };
}
