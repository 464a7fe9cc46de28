// The cache volume and the fetch Job of a fetched source, a hub download or an object store's
// prefix (ADR 0016, ADR 0020). Pure builders. The Job runs the operator's own image with the
// fetcher (fetcher/src/main.ts): no ServiceAccount token, no API access; the hub
// token is a file from the Secret, an object store's keys env from its Secret, in this pod only;
// the result goes out through the container's termination message, the progress on the pod
// IP's FETCH_PROGRESS_PORT while it runs.
import type {
  V1Container,
  V1EnvVar,
  V1Job,
  V1SecurityContext,
  V1OwnerReference,
  V1PersistentVolumeClaim,
  V1Toleration,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import { OBJECT_STORE_CREDENTIAL_KEYS, type DeploymentSpec } from '#api';
import { MANAGED_BY } from '../meta/labels.ts';
import {
  ANNOTATION_MODEL_DIGEST,
  ANNOTATION_MODEL_SOURCE,
  ANNOTATION_TOKENIZER_DIGEST,
  buildFetchJobName,
  buildModelCacheName,
  describeFetchedSource,
  fetchedSourceOf,
  FETCH_COMPONENT,
  FETCH_CONTAINER,
  LABEL_MODEL_CACHE,
  LABEL_VERIFY_FOR,
} from './names.ts';
import { MODEL_DIR } from './names.ts';

export interface ModelCacheConfig {
  /** The image the fetch Job runs: the operator's own (it holds the fetcher). */
  readonly fetchImage: string;
  /** The cache's storage class when the spec names none; unset: the cluster's default class. */
  readonly storageClassName?: string | undefined;
  /** Storage requested when the spec gives no sizeLimit. */
  readonly size: string;
  /** How often a running fetch's progress is read (default 5 s). */
  readonly progressPeriodMs?: number | undefined;
  /** Where node caches (download.cache Node) live on each node (default DEFAULT_MODEL_CACHE_NODE_ROOT). */
  readonly nodeRoot?: string | undefined;
  /** Hosts a fetched source's endpoint may reach over plain http:// (--insecure-endpoint-hosts). */
  readonly insecureEndpointHosts?: readonly string[] | undefined;
}

export const DEFAULT_MODEL_CACHE_NODE_ROOT = '/var/lib/cacheroute/models';

export const DEFAULT_MODEL_CACHE_SIZE = '200Gi';
export const DEFAULT_HUB_ENDPOINT = 'https://huggingface.co';
/** The cache volume's mount in the fetch pod; the files are in MODEL_SUBDIR below it. */
export const CACHE_MOUNT = '/cache';
/**
 * The model directory inside the volume: not its root, where a filesystem may keep a
 * `lost+found` the fetcher cannot read and that is no file of the model.
 */
export const MODEL_SUBDIR = 'model';
export const TOKEN_MOUNT = '/var/run/cacheroute/hub-token';
export const TOKEN_FILE = 'token';
export const TERMINATION_LOG = '/dev/termination-log';
export const FETCH_COMMAND = ['node', 'fetcher/src/main.ts'] as const;
/** Where the fetcher serves its progress (GET /progress on the pod IP), for the operator to read. */
export const FETCH_PROGRESS_PORT = 8497;
export const FETCH_PROGRESS_PORT_NAME = 'progress';
/** Exit codes of the fetcher that another attempt would repeat: bad arguments, files not the pinned ones. */
export const PERMANENT_EXIT_CODES = [2, 3];
const FETCH_UID = 1000;

export function buildCacheLabels(key: string): Record<string, string> {
  return {
    'app.kubernetes.io/name': 'model-cache',
    'app.kubernetes.io/part-of': 'cacheroute',
    'app.kubernetes.io/managed-by': MANAGED_BY,
    [LABEL_MODEL_CACHE]: key,
  };
}

/** The owner references of a cache: every Deployment using it, none the controller (ADR 0016). */
export function buildCacheOwners(users: readonly { name: string; uid: string }[]): V1OwnerReference[] {
  return [...users]
    .sort((a, b) => a.uid.localeCompare(b.uid))
    .map((u) => ({ apiVersion: 'cacheroute.dev/v1alpha1', kind: 'Deployment', name: u.name, uid: u.uid }));
}

export function buildModelCachePvc(
  namespace: string,
  key: string,
  spec: DeploymentSpec,
  config: ModelCacheConfig,
  owners: V1OwnerReference[],
): V1PersistentVolumeClaim {
  const fetched = fetchedSourceOf(spec);
  const storageClassName = fetched?.storageClassName ?? config.storageClassName;
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: buildModelCacheName(key),
      namespace,
      labels: buildCacheLabels(key),
      annotations: {
        [ANNOTATION_MODEL_DIGEST]: spec.model.digest,
        [ANNOTATION_TOKENIZER_DIGEST]: spec.model.tokenizerDigest,
        [ANNOTATION_MODEL_SOURCE]: describeFetchedSource(spec),
      },
      ownerReferences: owners,
    },
    spec: {
      // One volume for every replica on every node: written once by the Job, read by all.
      accessModes: ['ReadWriteMany'],
      volumeMode: 'Filesystem',
      resources: { requests: { storage: String(fetched?.sizeLimit ?? config.size) } },
      ...(storageClassName ? { storageClassName } : {}),
    },
  };
}

// zod's optional fields may hold `undefined`; the Kubernetes types may not.
const buildToleration = (
  t: NonNullable<NonNullable<DeploymentSpec['scheduling']>['tolerations']>[number],
): V1Toleration => Object.fromEntries(Object.entries(t).filter(([, v]) => v !== undefined));

export interface FetchJobInput {
  readonly namespace: string;
  readonly key: string;
  readonly spec: DeploymentSpec;
  readonly tokenizerSubpath: string | undefined;
  readonly config: ModelCacheConfig;
  /** The cache PVC, the Job's controller: the Job goes with it. */
  readonly cache: { name: string; uid: string };
}

/** The progress flags every model Job's fetcher gets: on its pod IP only, for the operator. */
const PROGRESS_ARGS = ['--progress-host', '$(POD_IP)', '--progress-port', String(FETCH_PROGRESS_PORT)];

/** The fetcher's arguments for a fetched source, into `dest` (`extra` before the progress flags). */
export function buildFetchArgs(
  spec: DeploymentSpec,
  tokenizerSubpath: string | undefined,
  dest: string,
  extra: readonly string[] = [],
): string[] {
  const store = spec.model.source.objectStore;
  if (store)
    return [
      '--object-store',
      store.url,
      ...(store.endpoint ? ['--store-endpoint', store.endpoint] : []),
      ...(store.region ? ['--store-region', store.region] : []),
      ...(store.forcePathStyle ? ['--store-path-style'] : []),
      ...buildCheckArgs(spec, tokenizerSubpath, dest),
      ...(store.proxy ? ['--proxy', store.proxy] : []),
      ...extra,
      ...PROGRESS_ARGS,
    ];
  const download = spec.model.source.download;
  return [
    '--endpoint',
    download?.endpoint ?? DEFAULT_HUB_ENDPOINT,
    '--repo',
    spec.model.path,
    '--revision',
    spec.model.revision ?? '',
    ...buildCheckArgs(spec, tokenizerSubpath, dest),
    ...(download?.tokenSecretRef ? ['--token-file', `${TOKEN_MOUNT}/${TOKEN_FILE}`] : []),
    ...(download?.proxy ? ['--proxy', download.proxy] : []),
    ...extra,
    ...PROGRESS_ARGS,
  ];
}

/** The verifier's arguments for staged files at `dest`. */
export function buildVerifyArgs(
  spec: DeploymentSpec,
  tokenizerSubpath: string | undefined,
  dest: string,
): string[] {
  return ['--verify-only', ...buildCheckArgs(spec, tokenizerSubpath, dest), ...PROGRESS_ARGS];
}

/** What every run of the fetcher is held to and where it says so: the digests, the files, the result. */
function buildCheckArgs(spec: DeploymentSpec, tokenizerSubpath: string | undefined, dest: string): string[] {
  return [
    '--digest',
    spec.model.digest,
    '--tokenizer-digest',
    spec.model.tokenizerDigest,
    ...(tokenizerSubpath !== undefined ? ['--tokenizer-subpath', tokenizerSubpath] : []),
    '--dest',
    dest,
    '--result-file',
    TERMINATION_LOG,
  ];
}

/** The hub token Secret as a 0400 file for the fetcher only; none without a tokenSecretRef. */
export function buildTokenVolume(spec: DeploymentSpec): { volumes: V1Volume[]; mounts: V1VolumeMount[] } {
  const token = spec.model.source.download?.tokenSecretRef;
  if (!token) return { volumes: [], mounts: [] };
  return {
    volumes: [
      {
        name: 'hub-token',
        secret: { secretName: token.name, items: [{ key: token.key, path: TOKEN_FILE }], defaultMode: 0o400 },
      },
    ],
    mounts: [{ name: 'hub-token', mountPath: TOKEN_MOUNT, readOnly: true }],
  };
}

/**
 * An object store's keys from its Secret, as env of the fetcher only (the SDK's own names; the
 * session token optional). A Secret's other keys are not taken: no envFrom, which would let a
 * key named NODE_OPTIONS change what the fetcher runs.
 */
export function buildStoreCredentialEnv(spec: DeploymentSpec): V1EnvVar[] {
  const ref = spec.model.source.objectStore?.credentialsSecretRef;
  if (!ref) return [];
  const fromSecret = (key: string, optional: boolean): V1EnvVar => ({
    name: key,
    valueFrom: { secretKeyRef: { name: ref.name, key, ...(optional ? { optional: true } : {}) } },
  });
  return [
    fromSecret(OBJECT_STORE_CREDENTIAL_KEYS.accessKeyId, false),
    fromSecret(OBJECT_STORE_CREDENTIAL_KEYS.secretAccessKey, false),
    fromSecret(OBJECT_STORE_CREDENTIAL_KEYS.sessionToken, true),
  ];
}

/** The root filesystem is read-only; Node may want a scratch directory. */
export const FETCH_TMP_VOLUME: V1Volume = { name: 'fetch-tmp', emptyDir: { sizeLimit: '64Mi' } };
const FETCH_TMP_MOUNT: V1VolumeMount = { name: 'fetch-tmp', mountPath: '/tmp' };

const NON_ROOT_CONTAINER: V1SecurityContext = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
};

/** The fetcher's container, in a Job or as a pod's init container (its scratch volume is FETCH_TMP_VOLUME). */
export function buildFetcherContainer(opts: {
  readonly config: ModelCacheConfig;
  readonly args: string[];
  readonly mounts: V1VolumeMount[];
  readonly env?: V1EnvVar[];
  readonly securityContext?: V1SecurityContext;
}): V1Container {
  return {
    name: FETCH_CONTAINER,
    image: opts.config.fetchImage,
    command: [...FETCH_COMMAND],
    args: opts.args,
    env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }, ...(opts.env ?? [])],
    ports: [{ name: FETCH_PROGRESS_PORT_NAME, containerPort: FETCH_PROGRESS_PORT, protocol: 'TCP' }],
    terminationMessagePath: TERMINATION_LOG,
    // A fetcher killed before it wrote its result still leaves its last words.
    terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: [...opts.mounts, FETCH_TMP_MOUNT],
    resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '2Gi' } },
    securityContext: opts.securityContext ?? NON_ROOT_CONTAINER,
  };
}

interface ModelJobParts {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly owner: V1OwnerReference;
  readonly spec: DeploymentSpec;
  readonly config: ModelCacheConfig;
  readonly args: string[];
  readonly volumes: V1Volume[];
  readonly mounts: V1VolumeMount[];
  readonly env?: V1EnvVar[];
  /** For IRSA or pod identity (an object store's serviceAccountName); its API token is not mounted. */
  readonly serviceAccountName?: string | undefined;
  /** fsGroup for a volume the Job writes; unset for one it only reads (no recursive chown of it). */
  readonly fsGroup: number | undefined;
}

/** A Job running the fetcher once: the fetch Job's and the verify Job's common shape. */
function buildModelJob(p: ModelJobParts): V1Job {
  const scheduling = p.spec.scheduling;
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: p.name, namespace: p.namespace, labels: p.labels, ownerReferences: [p.owner] },
    spec: {
      // Transient failures (the hub's 5xx past the fetcher's own retries, a node lost) get
      // another pod, which resumes; files that are not the pinned ones end the Job at once.
      backoffLimit: 3,
      podFailurePolicy: {
        rules: [
          {
            action: 'FailJob',
            onExitCodes: { containerName: FETCH_CONTAINER, operator: 'In', values: PERMANENT_EXIT_CODES },
          },
        ],
      },
      template: {
        metadata: { labels: p.labels },
        spec: {
          restartPolicy: 'Never',
          // The fetcher talks to the hub or the store only: no API credentials in its pod.
          automountServiceAccountToken: false,
          ...(p.serviceAccountName ? { serviceAccountName: p.serviceAccountName } : {}),
          enableServiceLinks: false,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: FETCH_UID,
            runAsGroup: FETCH_UID,
            ...(p.fsGroup !== undefined ? { fsGroup: p.fsGroup } : {}),
            seccompProfile: { type: 'RuntimeDefault' },
          },
          // The volume is mounted where the model's pods run: their node pool reaches the storage.
          ...(scheduling?.nodeSelector ? { nodeSelector: scheduling.nodeSelector } : {}),
          ...(scheduling?.tolerations ? { tolerations: scheduling.tolerations.map(buildToleration) } : {}),
          containers: [
            buildFetcherContainer({
              config: p.config,
              args: p.args,
              mounts: p.mounts,
              ...(p.env ? { env: p.env } : {}),
            }),
          ],
          volumes: [...p.volumes, FETCH_TMP_VOLUME],
        },
      },
    },
  };
}

export function buildFetchJob(input: FetchJobInput): V1Job {
  const { namespace, key, spec, config, cache } = input;
  const token = buildTokenVolume(spec);
  return buildModelJob({
    namespace,
    name: buildFetchJobName(key),
    labels: {
      ...buildCacheLabels(key),
      'app.kubernetes.io/name': 'model-fetch',
      'app.kubernetes.io/component': FETCH_COMPONENT,
    },
    owner: {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      name: cache.name,
      uid: cache.uid,
      controller: true,
    },
    spec,
    config,
    args: buildFetchArgs(spec, input.tokenizerSubpath, `${CACHE_MOUNT}/${MODEL_SUBDIR}`),
    volumes: [{ name: 'cache', persistentVolumeClaim: { claimName: cache.name } }, ...token.volumes],
    mounts: [{ name: 'cache', mountPath: CACHE_MOUNT }, ...token.mounts],
    env: buildStoreCredentialEnv(spec),
    serviceAccountName: spec.model.source.objectStore?.serviceAccountName,
    fsGroup: FETCH_UID,
  });
}

export interface VerifyJobInput {
  readonly namespace: string;
  readonly key: string;
  readonly name: string;
  readonly spec: DeploymentSpec;
  readonly tokenizerSubpath: string | undefined;
  readonly config: ModelCacheConfig;
  /** The Deployment it verifies for, its controller: the Job goes with it. */
  readonly deployment: { name: string; uid: string };
}

/**
 * A pvc source's verify Job: the fetcher with --verify-only over the claim, mounted read-only
 * as the model's pods mount it (same subPath), so what passes is what SGLang reads.
 */
export function buildVerifyJob(input: VerifyJobInput): V1Job {
  const { spec, tokenizerSubpath } = input;
  const pvc = spec.model.source.pvc;
  return buildModelJob({
    namespace: input.namespace,
    name: input.name,
    labels: {
      ...buildCacheLabels(input.key),
      'app.kubernetes.io/name': 'model-verify',
      'app.kubernetes.io/component': FETCH_COMPONENT,
      [LABEL_VERIFY_FOR]: input.deployment.name,
    },
    owner: {
      apiVersion: 'cacheroute.dev/v1alpha1',
      kind: 'Deployment',
      name: input.deployment.name,
      uid: input.deployment.uid,
      controller: true,
    },
    spec,
    config: input.config,
    args: buildVerifyArgs(spec, tokenizerSubpath, MODEL_DIR),
    volumes: [{ name: 'model', persistentVolumeClaim: { claimName: pvc?.claimName ?? '', readOnly: true } }],
    mounts: [
      {
        name: 'model',
        mountPath: MODEL_DIR,
        readOnly: true,
        ...(pvc?.subPath ? { subPath: pvc.subPath } : {}),
      },
    ],
    fsGroup: undefined,
  });
}
