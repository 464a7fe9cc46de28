// An InferencePool as a GIE gateway's Envoy takes it: its failureMode chooses the bootstrap
// (FailClose: GIE's reference one, the picked header on an ORIGINAL_DST cluster, a picker that
// does not answer is Envoy's 500; FailOpen: the picker health-checked and the pool's endpoints
// behind it, ADR 0037), and its selector and targetPorts give the endpoints FailOpen falls back
// to: the Ready pods it selects, each on each target port, each with the runtime key its pod
// reads from the Deployment's Secret (ADR 0048). `make run PICKER=1` and the e2e suite
// `picker` render Envoy from the operator's pool so, and follow it (follow-pool.ts): the view is
// built from the objects alone (buildPoolView), read once here or kept by watches there.
import { z } from 'zod';
import { buildRuntimeKeySecretName, DEPLOYMENT_LABEL } from '#api';
import { readRuntimeKeys } from '#api/runtime-key.ts';
import { kubectlOk } from '../../test/support/kubectl.ts';
import type { EnvoyRoute } from './bootstrap.ts';

const FailureMode = z.enum(['FailOpen', 'FailClose']);
export type PoolFailureMode = z.infer<typeof FailureMode>;

const InferencePool = z.object({
  metadata: z.object({ name: z.string(), namespace: z.string() }),
  spec: z.object({
    selector: z.object({ matchLabels: z.record(z.string(), z.string()) }),
    targetPorts: z.array(z.object({ number: z.number().int() })).min(1),
    // GIE's default when the reference leaves it out.
    endpointPickerRef: z.object({ failureMode: FailureMode.default('FailClose') }).optional(),
  }),
});

const SecretKeyRefs = z
  .array(
    z.object({
      env: z
        .array(
          z.object({
            valueFrom: z.object({ secretKeyRef: z.object({ name: z.string(), key: z.string() }) }).optional(),
          }),
        )
        .optional(),
    }),
  )
  .optional();

const Pod = z.object({
  metadata: z.object({
    name: z.string(),
    labels: z.record(z.string(), z.string()).optional(),
    deletionTimestamp: z.string().optional(),
  }),
  spec: z.object({ containers: SecretKeyRefs }).optional(),
  status: z
    .object({
      podIP: z.string().optional(),
      conditions: z.array(z.object({ type: z.string(), status: z.string() })).optional(),
    })
    .optional(),
});

const Secret = z.object({
  metadata: z.object({ name: z.string() }),
  data: z.record(z.string(), z.string()).optional(),
});

export interface PoolView {
  readonly namespace: string;
  readonly name: string;
  readonly failureMode: PoolFailureMode;
  /** `ip:port` of each Ready pod the selector picks, on each target port. */
  readonly endpoints: readonly string[];
  /**
   * FailOpen only: `ip:port` → the API key its runtime was started with (the Deployment's runtime
   * key Secret, the entry the pod's env names): what Envoy sends the pool with the picker down.
   */
  readonly runtimeKeys?: Readonly<Record<string, string>>;
}

/** The objects a pool's view is made of, as the API server sends them. */
export interface PoolObjects {
  /** The InferencePool. */
  readonly pool: unknown;
  /** Pods of its namespace (those its selector does not pick are left out here). */
  readonly pods: readonly unknown[];
  /** Secrets of its namespace: FailOpen reads the Deployment's runtime key Secret among them. */
  readonly secrets: readonly unknown[];
}

/** The runtime key Secret a pool's pods read their key from (its Deployment's). */
export function poolRuntimeKeySecretName(rawPool: unknown): string {
  const pool = InferencePool.parse(rawPool);
  return buildRuntimeKeySecretName(pool.spec.selector.matchLabels[DEPLOYMENT_LABEL] ?? pool.metadata.name);
}

/**
 * The pool's failure mode and endpoints (and under FailOpen each endpoint's runtime key) from its
 * objects: what Envoy routes on. Pure: readInferencePool (kubectl, once) and followInferencePool
 * (watches) both build their view here.
 */
export function buildPoolView(objects: PoolObjects): PoolView {
  const pool = InferencePool.parse(objects.pool);
  const { namespace, name } = pool.metadata;
  const selector = pool.spec.selector.matchLabels;
  const ready = objects.pods
    .map((raw) => Pod.parse(raw))
    .filter((p) => Object.entries(selector).every(([key, value]) => p.metadata.labels?.[key] === value))
    // As GIE's own IsPodReady (pkg/lwepp/util/pod): a pod being deleted is out of the pool even
    // while its Ready condition still says True, so a draining runtime gets no new request.
    .flatMap((p) =>
      p.status?.podIP &&
      p.metadata.deletionTimestamp === undefined &&
      p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
        ? [{ pod: p, ip: p.status.podIP }]
        : [],
    )
    .sort((a, b) => a.ip.localeCompare(b.ip));
  const onPorts = (ip: string): string[] => pool.spec.targetPorts.map((t) => `${ip}:${t.number}`);
  const failureMode = pool.spec.endpointPickerRef?.failureMode ?? 'FailClose';
  const view = { namespace, name, failureMode, endpoints: ready.flatMap((r) => onPorts(r.ip)) };
  if (failureMode === 'FailClose') return view;

  // FailOpen: each pod's key, by the Secret entry its env reads (a rollout runs two fingerprints).
  const secretName = poolRuntimeKeySecretName(objects.pool);
  const secret = objects.secrets.map((raw) => Secret.parse(raw)).find((s) => s.metadata.name === secretName);
  if (secret === undefined)
    throw new Error(
      `FailOpen pool ${namespace}/${name} has no runtime key Secret ${secretName}: Envoy could not serve its pods with the picker down`,
    );
  const keys = readRuntimeKeys(secret);
  const runtimeKeys: Record<string, string> = {};
  for (const { pod, ip } of ready) {
    const entry = (pod.spec?.containers ?? [])
      .flatMap((c) => c.env ?? [])
      .find((e) => e.valueFrom?.secretKeyRef.name === secretName)?.valueFrom?.secretKeyRef.key;
    const key = entry === undefined ? undefined : keys[entry];
    if (key === undefined)
      throw new Error(
        `pod ${namespace}/${pod.metadata.name} of FailOpen pool ${name} has no key in Secret ${secretName} ` +
          `(entry ${entry ?? 'not named by its env'}): Envoy could not serve it with the picker down`,
      );
    for (const endpoint of onPorts(ip)) runtimeKeys[endpoint] = key;
  }
  return { ...view, runtimeKeys };
}

const Items = z.object({ items: z.array(z.unknown()) });

/** The pool `namespace/name` and its endpoints now, from the API server (kubectl, once). */
export async function readInferencePool(
  kubeconfig: string,
  namespace: string,
  name: string,
): Promise<PoolView> {
  const k = { kubeconfig };
  const get = async (args: string[]): Promise<unknown> =>
    JSON.parse(await kubectlOk(['get', '-n', namespace, ...args, '-o', 'json'], k));
  const pool = await get(['inferencepools.inference.networking.k8s.io', name]);
  const selector = Object.entries(InferencePool.parse(pool).spec.selector.matchLabels)
    .map(([key, value]) => `${key}=${value}`)
    .join(',');
  const pods = Items.parse(await get(['pods', '-l', selector])).items;
  const failOpen = InferencePool.parse(pool).spec.endpointPickerRef?.failureMode === 'FailOpen';
  const secrets = failOpen ? [await get(['secret', poolRuntimeKeySecretName(pool)])] : [];
  return buildPoolView({ pool, pods, secrets });
}

/** Envoy's route for a pool whose picker listens on 127.0.0.1 (`port`, gRPC health on `healthPort`). */
export function buildPickerRouteForPool(
  pool: PoolView,
  picker: { readonly port: number; readonly healthPort: number },
): Extract<EnvoyRoute, { kind: 'picker' }> {
  if (pool.failureMode === 'FailClose') return { kind: 'picker', pickerPort: picker.port };
  if (pool.endpoints.length === 0)
    throw new Error(
      `InferencePool ${pool.namespace}/${pool.name} is FailOpen but selects no Ready pod: nothing to fail open to`,
    );
  return {
    kind: 'picker',
    pickerPort: picker.port,
    failOpen: {
      pool: pool.endpoints,
      pickerHealthPort: picker.healthPort,
      ...(pool.runtimeKeys ? { runtimeKeys: pool.runtimeKeys } : {}),
    },
  };
}
