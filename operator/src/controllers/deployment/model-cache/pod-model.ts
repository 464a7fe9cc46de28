// How a Deployment's SGLang pods get their model files (ADR 0016, ADR 0019): the volumes and
// the SGLang container's read-only mount, and, where the files are checked on the node itself,
// an init container running the fetcher before SGLang starts:
//   pvc (verified by a Job, plan.ts) and a Shared download (the cache the fetch Job filled): mounted
//   download with cache Node: a hostPath cache per node, filled by the first pod's init container
//     there (one at a time, --lock-file; a later pod finds the marker and fetches nothing)
//   hostPath with verify (the default with a fetch image): the node's copy verified before SGLang,
//     fully the first time on a node, then against the node's record of the files' stats
// Pods with an init container carry the cache label, so the model cache's informer sees them
// and plan.ts reads their verdicts.
import type { V1Container, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import type { DeploymentSpec } from '#api';
import { MODEL_DIR } from './names.ts';
import {
  buildModelCacheName,
  computeModelCacheKey,
  computeStagedKey,
  computeTokenizerSubpath,
  fetchedSourceOf,
  LABEL_MODEL_CACHE,
} from './names.ts';
import {
  buildFetchArgs,
  buildFetcherContainer,
  buildStoreCredentialEnv,
  buildTokenVolume,
  buildVerifyArgs,
  CACHE_MOUNT,
  DEFAULT_MODEL_CACHE_NODE_ROOT,
  FETCH_TMP_VOLUME,
  MODEL_SUBDIR,
  type ModelCacheConfig,
} from './objects.ts';

export interface PodModel {
  readonly volumes: V1Volume[];
  /** The SGLang container's mounts. */
  readonly mounts: V1VolumeMount[];
  readonly initContainers: V1Container[];
  /** Labels for the pod template. */
  readonly labels: Record<string, string>;
}

/** The lock one node's fetchers share, beside the files (hidden: outside any manifest). */
const NODE_LOCK = `${CACHE_MOUNT}/.fetch.lock`;
const VERIFY_STATE = '/var/run/cacheroute/verify-state';

// A node's directory is root's (DirectoryOrCreate makes it 0755 root): root, with no
// capabilities, writes what it owns and nothing else (and reads what the node staged).
const NODE_WRITER = {
  runAsUser: 0,
  runAsNonRoot: false,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
};

const nodeRootOf = (config: ModelCacheConfig): string =>
  (config.nodeRoot ?? DEFAULT_MODEL_CACHE_NODE_ROOT).replace(/\/+$/, '');

/** How a node cache's files are checked: every counted file, in an init container of each pod. */
export function checksOnNode(spec: DeploymentSpec, config: ModelCacheConfig | undefined): boolean {
  const source = spec.model.source;
  if (!config) return false;
  const fetched = fetchedSourceOf(spec);
  if (fetched) return fetched.cache === 'Node';
  return source.hostPath !== undefined && source.hostPath.verify !== false;
}

/** The key a node-checked model's pods are labelled with (the cache's, or the staged files'). */
export function computeNodeKey(spec: DeploymentSpec): string {
  return fetchedSourceOf(spec) ? computeModelCacheKey(spec) : computeStagedKey(spec);
}

export function buildPodModel(spec: DeploymentSpec, config: ModelCacheConfig | undefined): PodModel {
  const source = spec.model.source;
  const readOnly = (extra: Partial<V1VolumeMount> = {}): V1VolumeMount[] => [
    { name: 'model', mountPath: MODEL_DIR, readOnly: true, ...extra },
  ];
  const none = { initContainers: [], labels: {} };
  if (source.pvc)
    return {
      volumes: [
        { name: 'model', persistentVolumeClaim: { claimName: source.pvc.claimName, readOnly: true } },
      ],
      mounts: readOnly(source.pvc.subPath ? { subPath: source.pvc.subPath } : {}),
      ...none,
    };
  const tokenizer = computeTokenizerSubpath(spec);
  const tokenizerSubpath = tokenizer.ok ? tokenizer.subpath : undefined;
  if (source.hostPath) {
    const volumes: V1Volume[] = [
      { name: 'model', hostPath: { path: source.hostPath.path, type: 'Directory' } },
    ];
    if (!config || !checksOnNode(spec, config)) return { volumes, mounts: readOnly(), ...none };
    const key = computeNodeKey(spec);
    return {
      volumes: [
        ...volumes,
        // The node's record of what it verified, beside the read-only files (staged-marker.ts).
        {
          name: 'verify-state',
          hostPath: { path: `${nodeRootOf(config)}/verified/${key}`, type: 'DirectoryOrCreate' },
        },
        FETCH_TMP_VOLUME,
      ],
      mounts: readOnly(),
      initContainers: [
        buildFetcherContainer({
          config,
          args: [...buildVerifyArgs(spec, tokenizerSubpath, MODEL_DIR), '--marker-dir', VERIFY_STATE],
          mounts: [...readOnly(), { name: 'verify-state', mountPath: VERIFY_STATE }],
          securityContext: NODE_WRITER,
        }),
      ],
      labels: { [LABEL_MODEL_CACHE]: key },
    };
  }
  const key = computeModelCacheKey(spec);
  if (!config || !checksOnNode(spec, config)) {
    // The shared cache the fetch Job filled and verified: the workload is applied only once it is.
    const claimName = buildModelCacheName(key);
    return {
      volumes: [{ name: 'model', persistentVolumeClaim: { claimName, readOnly: true } }],
      mounts: readOnly({ subPath: MODEL_SUBDIR }),
      ...none,
    };
  }
  const token = buildTokenVolume(spec);
  return {
    volumes: [
      { name: 'model', hostPath: { path: `${nodeRootOf(config)}/${key}`, type: 'DirectoryOrCreate' } },
      ...token.volumes,
      FETCH_TMP_VOLUME,
    ],
    mounts: readOnly({ subPath: MODEL_SUBDIR }),
    initContainers: [
      buildFetcherContainer({
        config,
        args: buildFetchArgs(spec, tokenizerSubpath, `${CACHE_MOUNT}/${MODEL_SUBDIR}`, [
          '--lock-file',
          NODE_LOCK,
        ]),
        mounts: [{ name: 'model', mountPath: CACHE_MOUNT }, ...token.mounts],
        env: buildStoreCredentialEnv(spec),
        securityContext: NODE_WRITER,
      }),
    ],
    labels: { [LABEL_MODEL_CACHE]: key },
  };
}
