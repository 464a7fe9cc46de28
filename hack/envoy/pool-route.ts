// An InferencePool as a GIE gateway's Envoy takes it: its failureMode chooses the bootstrap
// (FailClose: GIE's reference one, the picked header on an ORIGINAL_DST cluster, a picker that
// does not answer is Envoy's 500; FailOpen: the picker health-checked and the pool's endpoints
// behind it, ADR 0037), and its selector and targetPorts give the endpoints FailOpen falls back
// to: the Ready pods it selects, each on each target port. `make run PICKER=1` and the e2e suite
// `picker` render Envoy from the operator's pool so.
import { z } from 'zod';
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

const Pods = z.object({
  items: z.array(
    z.object({
      status: z
        .object({
          podIP: z.string().optional(),
          conditions: z.array(z.object({ type: z.string(), status: z.string() })).optional(),
        })
        .optional(),
    }),
  ),
});

export interface PoolView {
  readonly namespace: string;
  readonly name: string;
  readonly failureMode: PoolFailureMode;
  /** `ip:port` of each Ready pod the selector picks, on each target port. */
  readonly endpoints: readonly string[];
}

/** The pool `namespace/name` and its endpoints now, from the API server. */
export async function readInferencePool(
  kubeconfig: string,
  namespace: string,
  name: string,
): Promise<PoolView> {
  const k = { kubeconfig };
  const raw: unknown = JSON.parse(
    await kubectlOk(
      ['get', 'inferencepools.inference.networking.k8s.io', '-n', namespace, name, '-o', 'json'],
      k,
    ),
  );
  const pool = InferencePool.parse(raw);
  const selector = Object.entries(pool.spec.selector.matchLabels)
    .map(([key, value]) => `${key}=${value}`)
    .join(',');
  const pods = Pods.parse(
    JSON.parse(await kubectlOk(['get', 'pods', '-n', namespace, '-l', selector, '-o', 'json'], k)),
  );
  const ready = pods.items.flatMap((p) =>
    p.status?.podIP && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
      ? [p.status.podIP]
      : [],
  );
  return {
    namespace,
    name,
    failureMode: pool.spec.endpointPickerRef?.failureMode ?? 'FailClose',
    endpoints: ready.sort().flatMap((ip) => pool.spec.targetPorts.map((t) => `${ip}:${t.number}`)),
  };
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
    failOpen: { pool: pool.endpoints, pickerHealthPort: picker.healthPort },
  };
}
