// The bound bench-operator.ts measures the operator against, in the same run: the objects
// the operator would make for N Deployments (runtime key Secret, Services, apps/v1
// Deployments: buildDesired's, byte for byte, without owner references since no
// cacheroute Deployment exists), applied by a straight-line driver with the operator's
// concurrency, until every pod is Ready and its runtime (a group's leader's) answers its identity read-back
// (what the operator verifies). No informers, no work queue, no status: what is left of
// the operator's convergence time over this is the operator's own cost; the rest is the
// control plane's (controller-manager, scheduler, KWOK) and the machine's.
import type { V1Deployment, V1Service, V1Secret } from '@kubernetes/client-node';
import { validateResource, type DeploymentResource } from '#api';
import { computeDeclaredIdentity, SGLANG_PORT } from '../../operator/src/controllers/deployment/args.ts';
import { buildDesired, toKubeObject } from '../../operator/src/controllers/deployment/desired.ts';
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';
import { LABEL_DEPLOYMENT } from '../../operator/src/controllers/deployment/meta/labels.ts';
import {
  buildLeaderSelector,
  type LeaderWorkerSet,
} from '../../operator/src/controllers/deployment/multi-node/leader-worker-set.ts';
import { buildRuntimeKeySecret } from '../../operator/src/controllers/deployment/runtime-keys.ts';
import { readIdentity } from '../../operator/src/controllers/deployment/verify.ts';
import type { KubeClient } from '#kube/client.ts';
import { mapLimited } from '../../operator/src/manager/map-limited.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { buildEndpointUrl } from '#sglang/endpoint-url.ts';
import type { Manifest } from '../support/samples.ts';

export interface BaselineOptions {
  readonly driver: KubeClient;
  readonly namespace: string;
  readonly manifests: readonly Manifest[];
  /** The operator's worker count: the same parallelism for the same work. */
  readonly concurrency: number;
  readonly deadline: number;
  readonly log: (msg: string) => void;
}

interface Planned {
  readonly root: DeploymentResource;
  readonly key: string;
  readonly secret: KubeObject;
  readonly services: KubeObject[];
  readonly workloads: KubeObject[];
  readonly groupSets: KubeObject[];
}

const withoutOwners = (o: V1Deployment | V1Service | V1Secret | LeaderWorkerSet): KubeObject => {
  const { ownerReferences: _owners, ...metadata } = toKubeObject(o).metadata ?? {};
  return { ...toKubeObject(o), metadata };
};

function plan(manifest: Manifest, namespace: string, index: number): Planned {
  const parsed = validateResource({ ...manifest, metadata: { ...manifest.metadata, namespace } });
  if (!parsed.ok || parsed.value.kind !== 'Deployment')
    throw new Error('baseline: not a valid Deployment manifest');
  const root = parsed.value;
  const desired = buildDesired(root);
  const key = `baseline-key-${index}`;
  return {
    root,
    key,
    secret: withoutOwners(buildRuntimeKeySecret(root, { [desired.fingerprint]: key })),
    services: desired.services.map(withoutOwners),
    workloads: desired.workloads.map(withoutOwners),
    groupSets: desired.groupSets.map(withoutOwners),
  };
}

/** Create → every pod Ready and its runtime answering as declared, in ms. */
export async function measureControlPlaneBaseline(opts: BaselineOptions): Promise<number> {
  const { driver, namespace } = opts;
  const planned = opts.manifests.map((m, i) => plan(m, namespace, i));
  const byName = new Map(planned.map((p) => [p.root.metadata.name ?? '', p]));
  const t0 = performance.now();
  // As the operator orders it: the key and the Services beside each other, then the workload.
  await mapLimited(planned, opts.concurrency, async (p) => {
    await Promise.all([
      driver.create(Resources.secrets, p.secret),
      ...p.services.map((s) => driver.create(Resources.services, s)),
    ]);
    for (const w of p.workloads) await driver.create(Resources.deployments, w);
    for (const g of p.groupSets) await driver.create(Resources.leaderWorkerSets, g);
  });
  opts.log(
    `baseline: applied ${planned.length} Deployments' objects in ${Math.round(performance.now() - t0)} ms`,
  );
  const answered = new Set<string>();
  while (answered.size < planned.length) {
    if (Date.now() > opts.deadline)
      throw new Error(`baseline: ${answered.size}/${planned.length} answered at the deadline`);
    const pods = await driver.list<PodObject>(Resources.pods, { namespace });
    const ready = pods.items.filter(
      (p) =>
        !answered.has(p.metadata?.name ?? '') &&
        p.status?.podIP &&
        p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    await mapLimited(ready, opts.concurrency, async (pod) => {
      const p = byName.get(pod.metadata?.labels?.[LABEL_DEPLOYMENT] ?? '');
      const engine = p && buildDesired(p.root).engines[0];
      if (!p || !engine) return;
      // A group answers on its leader (the workers serve a health server only).
      const leader = Object.entries(buildLeaderSelector(p.root.spec));
      if (!leader.every(([k, v]) => pod.metadata?.labels?.[k] === v)) return;
      const readback = await readIdentity(
        buildEndpointUrl(pod.status?.podIP ?? '', SGLANG_PORT),
        computeDeclaredIdentity(p.root.spec, engine),
        { timeoutMs: 5_000, dataParallel: p.root.spec.parallelism.data, apiKey: p.key },
      );
      if (readback.ok && readback.mismatches === '') answered.add(pod.metadata?.name ?? '');
    });
    if (answered.size < planned.length) await new Promise((r) => setTimeout(r, 250));
  }
  return performance.now() - t0;
}
