import { randomBytes } from 'node:crypto';
import {
  buildRuntimeKeySecretName,
  DECLARED_REPLICAS_ANNOTATION,
  DeploymentPartResource,
  validateResource,
  type DeploymentResource,
  type DeploymentStatus,
  type Endpoint,
} from '#api';
import { applyOwned, FIELD_MANAGER } from '../../manager/apply.ts';
import { isNotFound, type KubeClient } from '#kube/client.ts';
import type { ControllerDefinition, Manager } from '../../manager/manager.ts';
import { controllerOf, formatKey, type DataObject, type KubeObject, type ObjectKey } from '#kube/objects.ts';
import { TerminalError, type ReconcileContext, type ReconcileResult } from '../../manager/reconcile.ts';
import { Resources, type ResourceType } from '#kube/resources.ts';
import { writeStatusIfChanged } from '../../manager/status.ts';
import { buildRuntimeKeyLookup, readRuntimeKeys } from '#api/runtime-key.ts';
import { buildEndpointUrl } from '#sglang/endpoint-url.ts';
import { computeDeclaredIdentity, SGLANG_PORT } from './args.ts';
import { chooseCacheVerdict } from './cache-health/assess.ts';
import { CacheHealthProber } from './cache-health/prober.ts';
import { buildDesired, toKubeObject, type DesiredState } from './desired.ts';
import {
  buildUnownedEndpoint,
  buildVerifiedEndpoint,
  planVerification,
  REVERIFY_AFTER_MS,
} from './endpoints.ts';
import { EndpointReason } from './meta/endpoint-reasons.ts';
import type { PodObject } from './meta/pod-view.ts';
import { planEvents } from './events.ts';
import {
  buildDeploymentPart,
  computePartsStatus,
  planParts,
  withPartReplicas,
  type LivePart,
  type PartPlan,
} from './parts.ts';
import { LABEL_DEPLOYMENT, LABEL_FINGERPRINT } from './meta/labels.ts';
import {
  buildRuntimeNetworkPolicy,
  buildRuntimeNetworkPolicyName,
  type RuntimeIngress,
} from './network-policy.ts';
import { buildRuntimeKeySecret, planRuntimeKeys } from './runtime-keys.ts';
import { planWake, withWokenReplicas, type WakePlan } from './wake/plan.ts';
import { WakeWatcher } from './wake/watcher.ts';
import { computePodTrouble, computeStatus } from './status.ts';
import { DEFAULT_MODEL_CACHE_NODE_ROOT, type ModelCacheConfig } from './model-cache/objects.ts';
import { checkHostPath, HOST_PATH_NOT_ALLOWED } from './model-cache/host-path-roots.ts';
import { findEarlierClaimElsewhere, mapSameServedName } from './served-name.ts';
import { buildModelDelivery } from './model-cache/shell.ts';
import { readIdentity } from './verify.ts';
import { checkOwnership, memoizeReads } from './ownership.ts';
import {
  LEADER_WORKER_SET_MISSING,
  LEADER_WORKER_SET_MISSING_MESSAGE,
  leaderWorkerSetApi,
} from './multi-node/availability.ts';
import { buildEndpointViews, isGroupWorker } from './multi-node/groups.ts';
import { registerDeploymentMetrics } from './metrics.ts';
import { buildConditionPatch, planVerifiedConditions } from './readiness-gate/verified.ts';
import { LABEL_L3, planL3, type FileL3Plan, type L3Plan } from './l3/plan.ts';
import { computeL3Status, type LiveClaim } from './l3/status.ts';
import {
  buildMooncakeNetworkPolicy,
  buildMooncakeNetworkPolicyName,
  LABEL_L3_STORE,
  type MooncakePlan,
} from './l3/mooncake.ts';
import { computeMooncakeStatus, type StorePod } from './l3/mooncake-status.ts';
import { readMasterGauges } from './l3/mooncake-metrics.ts';

export interface DeploymentControllerOptions {
  manager: Manager;
  client: KubeClient;
  /** How long one identity read-back may take. */
  verifyTimeoutMs?: number;
  /** Asking a Ready pod's runtime again until it answers (its readiness has no watch). */
  pendingRequeueMs?: number;
  concurrency?: number;
  /**
   * Who may reach the SGLang pods besides their own Deployment's pods: each Deployment gets a
   * NetworkPolicy admitting these. Absent: no NetworkPolicy (one made earlier is deleted).
   */
  runtimeIngress?: RuntimeIngress | undefined;
  /** New runtime API keys (default: 32 random bytes, hex). */
  generateKey?: () => string;
  /**
   * Cache health (the CacheHealthy condition and status.cache): measured every `periodMs`
   * (0 or absent: not measured), with the gateway tier's predictions when `gatewayAdminUrl` is set.
   */
  cacheHealth?: { periodMs: number; windowMs?: number; gatewayAdminUrl?: string | undefined } | undefined;
  /**
   * How long a runtime key outlives the last status listing of its fingerprint (default 30 s): the
   * gateway's Secret and status watches have no order.
   */
  runtimeKeyGraceMs?: number;
  /** Wake from zero (wake/): the gateway tier read for demand this often; unset: Deployments do not wake. */
  wake?: { gatewayAdminUrl: string; periodMs?: number } | undefined;
  /** Download sources' shared cache and its fetch Job (model-cache/); unset: they are not fetched. */
  modelCache?: ModelCacheConfig | undefined;
  /**
   * The node directories a hostPath model source may name (host-path-roots.ts); unset: the node
   * model cache root only. A source outside them gets no workload, and status and an event say why.
   */
  hostPathRoots?: readonly string[] | undefined;
  /** The image of the Mooncake stores the operator runs for HiCache's `mooncake` L3 (l3/mooncake.ts). */
  mooncakeImage?: string | undefined;
}

type DeploymentObject = KubeObject & DeploymentResource;
/** The pods carrying a Deployment's label: its own, and the reason each other one is not. */
interface PodsByOwner {
  labelled: readonly PodObject[];
  owned: readonly PodObject[];
  unowned: ReadonlyMap<string, string>;
}
type ClaimObject = KubeObject & LiveClaim;

const POD_SELECTOR = LABEL_DEPLOYMENT;
const KEY_GRACE_MS = 30_000;
const CONTROLLER = 'deployment';
const LWS_RECHECK_MS = 30_000;
/** A Mooncake store's usage changes with no event: status reads its master this often. */
const MOONCAKE_REFRESH_MS = 30_000;
const MOONCAKE_READ_TIMEOUT_MS = 2_000;

export function buildDeploymentController(opts: DeploymentControllerOptions): ControllerDefinition {
  const { manager, client } = opts;
  const roots = manager.informer<DeploymentObject>(Resources.sglangDeployments);
  registerDeploymentMetrics(manager.metrics.registry, { list: () => roots.list() });
  const pods = manager.informer<PodObject>(Resources.pods, POD_SELECTOR);
  const workloads = manager.informer(Resources.deployments);
  const services = manager.informer(Resources.services);
  // Only the runtime key Secrets are cached (the operator's cacheSelectors), never other Secrets.
  const secrets = manager.informer<DataObject>(Resources.secrets);
  const networkPolicies = manager.informer(Resources.networkPolicies);
  const parts = manager.informer(Resources.deploymentParts);
  // Only the L3 claims the operator made are cached (l3/plan.ts); a claim a user names is read.
  const l3Claims = manager.informer<ClaimObject>(Resources.persistentVolumeClaims, LABEL_L3);
  // The Mooncake stores' pods (l3/mooncake.ts): their IP and readiness say where the master answers.
  const storePods = manager.informer<PodObject>(Resources.pods, LABEL_L3_STORE);
  const l3Options = { mooncakeImage: opts.mooncakeImage };
  const runtimeKey = buildRuntimeKeyLookup(secrets);
  const modelDelivery = buildModelDelivery({
    manager,
    client,
    roots,
    config: opts.modelCache,
    enqueue: (key) => manager.enqueue(CONTROLLER, key),
  });
  const lwsApi = leaderWorkerSetApi(client);
  const nodeCacheRoot = opts.modelCache?.nodeRoot ?? DEFAULT_MODEL_CACHE_NODE_ROOT;
  const hostPathRoots = opts.hostPathRoots ?? [nodeCacheRoot];
  const generateKey = opts.generateKey ?? (() => randomBytes(32).toString('hex'));
  const verifyTimeoutMs = opts.verifyTimeoutMs ?? 5_000;
  const pendingRequeueMs = opts.pendingRequeueMs ?? 5_000;
  // What each leader pass over the Deployments is given: the informer's list, leadership, this
  // controller's queue for what it found changed, its log and the operator's stop.
  const overDeployments = (component: string) => ({
    deployments: () => roots.list(),
    isLeader: () => manager.isLeader(),
    onChanged: (key: ObjectKey) => manager.enqueue(CONTROLLER, key),
    logger: manager.logger.child({ component }),
    signal: manager.stopSignal,
  });
  const cacheHealth = opts.cacheHealth?.periodMs
    ? new CacheHealthProber({ ...opts.cacheHealth, ...overDeployments('cache-health') })
    : undefined;
  cacheHealth?.start();
  const wake = opts.wake
    ? new WakeWatcher({
        gatewayAdminUrl: opts.wake.gatewayAdminUrl,
        periodMs: opts.wake.periodMs ?? 2_000,
        ...overDeployments('wake'),
      })
    : undefined;
  wake?.start();

  function refuseAdoption(root: DeploymentObject, message: string): never {
    manager.events.event(root, 'Warning', 'AdoptionRefused', message);
    throw new TerminalError(message);
  }

  // Per Deployment (namespace/name), when status last listed an endpoint of each fingerprint.
  // The gateway reads the Secret and the status on separate watches, in no set order: a key
  // stays keyGraceMs after status stopped listing its fingerprint, so a gateway whose
  // status watch lags still has the key of every endpoint it routes to.
  const keyGraceMs = opts.runtimeKeyGraceMs ?? KEY_GRACE_MS;
  const lastListed = new Map<string, Map<string, number>>();
  const inGrace = new Set<string>();

  function recentlyListed(deployment: string, listed: readonly string[], nowMs: number): Set<string> {
    const seen = lastListed.get(deployment) ?? new Map<string, number>();
    for (const fingerprint of listed) seen.set(fingerprint, nowMs);
    for (const [fingerprint, at] of seen) if (nowMs - at >= keyGraceMs) seen.delete(fingerprint);
    if (seen.size > 0) lastListed.set(deployment, seen);
    else lastListed.delete(deployment);
    const kept = new Set(seen.keys());
    if ([...kept].some((f) => !listed.includes(f))) inGrace.add(deployment);
    else inGrace.delete(deployment);
    return kept;
  }

  /**
   * The runtime keys (runtime-keys.ts), before the workloads whose pods read them. A new key is
   * made only after a live read: the cache may not show a key written moments ago, and a second
   * key for one fingerprint would lock the gateway out of the pods started with the first.
   */
  async function applyRuntimeKeys(
    obj: DeploymentObject,
    root: DeploymentResource,
    desired: DesiredState,
    ctx: ReconcileContext,
  ): Promise<void> {
    const ns = root.metadata.namespace ?? '';
    const name = root.metadata.name ?? '';
    const secretName = buildRuntimeKeySecretName(name);
    const podFingerprints = new Set(
      pods
        .list({ namespace: ns, labels: { [LABEL_DEPLOYMENT]: name } })
        .map((p) => p.metadata?.labels?.[LABEL_FINGERPRINT] ?? ''),
    );
    const listedFingerprints = recentlyListed(
      `${ns}/${name}`,
      (root.status?.endpoints ?? []).flatMap((e) => e.fingerprint ?? []),
      ctx.now().getTime(),
    );
    const planWith = (live: DataObject | undefined) =>
      planRuntimeKeys(
        {
          current: desired.fingerprint,
          existing: readRuntimeKeys(live),
          podFingerprints,
          listedFingerprints,
        },
        generateKey,
      );
    let live = secrets.get(ns, secretName);
    let plan = planWith(live);
    if (plan.added !== undefined) {
      live = await client.get<DataObject>(Resources.secrets, ns, secretName);
      plan = planWith(live);
    }
    const result = await applyOwned(
      client,
      Resources.secrets,
      toKubeObject(buildRuntimeKeySecret(root, plan.keys)),
      { live: live ?? null, ownerUid: obj.metadata?.uid ?? '' },
    );
    if (!result.ok) refuseAdoption(obj, result.error.message);
    if (plan.added !== undefined) ctx.logger.info('runtime API key made', { fingerprint: plan.added });
    if (plan.dropped.length > 0)
      ctx.logger.info('runtime API keys dropped: no pod runs them and status lists none', {
        fingerprints: plan.dropped.join(','),
      });
  }

  /** The Deployment's NetworkPolicy, or none when the operator runs without peers (one made earlier goes). */
  async function applyNetworkPolicy(obj: DeploymentObject, root: DeploymentResource): Promise<void> {
    const ns = root.metadata.namespace ?? '';
    const name = buildRuntimeNetworkPolicyName(root.metadata.name ?? '');
    const live = networkPolicies.get(ns, name);
    const uid = obj.metadata?.uid ?? '';
    if (!opts.runtimeIngress) {
      if (live && controllerOf(live)?.uid === uid)
        await client.delete(Resources.networkPolicies, ns, name, { uid: live.metadata?.uid ?? '' });
      return;
    }
    const desired = toKubeObject(buildRuntimeNetworkPolicy(root, opts.runtimeIngress));
    const result = await applyOwned(client, Resources.networkPolicies, desired, {
      live: live ?? null,
      ownerUid: uid,
    });
    if (!result.ok) refuseAdoption(obj, result.error.message);
  }

  async function applyDesired(
    obj: DeploymentObject,
    root: DeploymentResource,
    desired: DesiredState,
    ctx: ReconcileContext,
    withWorkloads: boolean,
  ): Promise<void> {
    const uid = obj.metadata?.uid ?? '';
    const ns = root.metadata.namespace ?? '';
    const applyAll = async (
      resource: ResourceType,
      objs: readonly KubeObject[],
      // No cache: applyOwned reads the live object with a GET (and writes only a difference).
      cache: { get(namespace: string, name: string): KubeObject | undefined } | undefined,
    ): Promise<void> => {
      const results = await Promise.all(
        objs.map((o) =>
          applyOwned(client, resource, o, {
            ...(cache ? { live: cache.get(ns, o.metadata?.name ?? '') ?? null } : {}),
            ownerUid: uid,
          }),
        ),
      );
      const refused = results.find((r) => !r.ok);
      if (refused && !refused.ok) refuseAdoption(obj, refused.error.message);
    };
    // The runtime keys come before the workloads whose pods read them; what no pod reads
    // (Services, the NetworkPolicy) goes beside them, one round trip fewer for a new Deployment.
    await Promise.all([
      applyRuntimeKeys(obj, root, desired, ctx),
      applyAll(Resources.services, desired.services.map(toKubeObject), services),
      applyNetworkPolicy(obj, root),
    ]);
    // No workload before its model files are verified: SGLang never starts on unverified files,
    // and workloads that exist keep serving the files they have.
    if (withWorkloads) {
      await applyAll(Resources.deployments, desired.workloads.map(toKubeObject), workloads);
      // No LWS informer (multi-node/availability.ts): applyOwned reads each live set with a GET.
      await applyAll(Resources.leaderWorkerSets, desired.groupSets.map(toKubeObject), undefined);
    }
  }

  /**
   * The pods carrying the Deployment's label, split by ownership: the labels only find candidates,
   * a pod is the Deployment's by its owner chain (ownership.ts), read once per pass for all of them.
   */
  async function sortByOwnership(
    obj: DeploymentObject,
    labelled: readonly PodObject[],
  ): Promise<PodsByOwner> {
    const readOwner = memoizeReads(
      (rt, namespace, name) => client.get(rt, namespace, name),
      [
        { resource: Resources.deployments, get: (namespace, name) => workloads.get(namespace, name) },
        // A group's leader pod (a worker's chain passes it) carries the label: it is in the cache.
        { resource: Resources.pods, get: (namespace, name) => pods.get(namespace, name) },
      ],
    );
    const verdicts = await Promise.all(
      labelled.map(async (pod) => ({
        pod,
        ownership: await checkOwnership(pod, obj.metadata?.uid ?? '', readOwner),
      })),
    );
    const unowned = new Map<string, string>();
    for (const { pod, ownership } of verdicts)
      if (!ownership.owned) unowned.set(pod.metadata?.name ?? '', ownership.reason);
    return { owned: verdicts.filter((v) => v.ownership.owned).map((v) => v.pod), labelled, unowned };
  }

  async function observeEndpoints(
    root: DeploymentResource,
    desired: DesiredState,
    ctx: ReconcileContext,
    pods: PodsByOwner,
  ): Promise<Endpoint[]> {
    const ns = root.metadata.namespace ?? '';
    const previous = new Map((root.status?.endpoints ?? []).map((e) => [e.pod, e]));
    const bootstrapPort = root.spec.disaggregation?.bootstrapPort;
    const now = ctx.now();
    // Pods that are not the Deployment's are listed, never verified nor sent the key; a group's
    // readiness counts its own workers only.
    const unowned = buildEndpointViews(pods.labelled.filter((p) => pods.unowned.has(p.metadata?.name ?? '')))
      .filter((v) => !v.terminating)
      .map((pod) => buildUnownedEndpoint(pod, bootstrapPort, pods.unowned.get(pod.name) ?? ''));
    // One endpoint per LeaderWorkerSet group, its leader (multi-node/groups.ts).
    const views = buildEndpointViews(pods.owned).filter((v) => !v.terminating);
    const owned = await Promise.all(
      views.map(async (pod) => {
        const plan = planVerification(pod, previous.get(pod.name), {
          fingerprint: desired.fingerprint,
          bootstrapPort,
          nowMs: now.getTime(),
        });
        if (plan.action !== 'fetch') return plan.endpoint;
        const engine = desired.engines.find((e) => e.role === pod.role);
        if (!engine)
          return buildVerifiedEndpoint(
            pod,
            bootstrapPort,
            { ok: false, error: `role ${pod.role} is not in the spec` },
            now,
          );
        const declared = computeDeclaredIdentity(root.spec, engine);
        const readback = await readIdentity(buildEndpointUrl(pod.ip ?? '', SGLANG_PORT), declared, {
          timeoutMs: verifyTimeoutMs,
          dataParallel: root.spec.parallelism.data,
          signal: ctx.signal,
          apiKey: runtimeKey(ns, root.metadata.name ?? '', pod.fingerprint),
        });
        return buildVerifiedEndpoint(pod, bootstrapPort, readback, ctx.now());
      }),
    );
    return [...owned, ...unowned];
  }

  /**
   * Each gated pod's verified condition (readiness-gate/), from this pass's endpoints: the kubelet
   * makes the pod Ready once it is True. A pod gone meanwhile is skipped; another failure fails
   * the pass, retried with backoff (no pod event would bring the pass again).
   */
  async function markVerified(
    namespace: string,
    owned: readonly PodObject[],
    endpoints: readonly Endpoint[],
    now: Date,
  ): Promise<void> {
    const byName = new Map(owned.map((p) => [p.metadata?.name ?? '', p]));
    await Promise.all(
      planVerifiedConditions(owned, endpoints).map(async ({ pod, condition }) => {
        const patch = buildConditionPatch(byName.get(pod), condition, now);
        try {
          await client.patch(Resources.pods, namespace, pod, patch, 'strategic', {
            subresource: 'status',
            fieldManager: FIELD_MANAGER,
          });
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
      }),
    );
  }

  /** What a part's cache entry says about its replicas (parts.ts). */
  function livePart(namespace: string, name: string): LivePart | undefined {
    const parsed = DeploymentPartResource.safeParse(parts.get(namespace, name));
    if (!parsed.success) return undefined;
    const { spec, metadata } = parsed.data;
    return { replicas: spec.replicas, declared: metadata.annotations?.[DECLARED_REPLICAS_ANNOTATION] };
  }

  /**
   * Each part's DeploymentPart (parts.ts): its fields by server-side apply, and its replicas by a
   * merge patch only when the declared value is carried to it, so an autoscaler's value stands.
   */
  async function applyParts(obj: DeploymentObject, root: DeploymentResource, plans: readonly PartPlan[]) {
    const ns = root.metadata.namespace ?? '';
    const ownerUid = obj.metadata?.uid ?? '';
    await Promise.all(
      plans.map(async (plan) => {
        const desired = buildDeploymentPart(root, plan.part) as unknown as KubeObject;
        const result = await applyOwned(client, Resources.deploymentParts, desired, {
          live: parts.get(ns, plan.name) ?? null,
          ownerUid,
        });
        if (!result.ok) refuseAdoption(obj, result.error.message);
        if (plan.propagate)
          await client.patch(Resources.deploymentParts, ns, plan.name, plan.propagate, 'merge', {
            fieldManager: FIELD_MANAGER,
          });
      }),
    );
  }

  /**
   * HiCache's L3 claims (l3/plan.ts): the ones the operator makes applied, the ones it made and
   * no role asks for any more deleted (Kubernetes keeps a claim a pod still mounts until it goes).
   */
  async function applyL3Claims(
    obj: DeploymentObject,
    root: DeploymentResource,
    plans: readonly L3Plan[],
    applying: boolean,
  ): Promise<void> {
    // Nothing is applied while the identity is refused or the model source is blocked.
    if (!applying) return;
    const ns = root.metadata.namespace ?? '';
    const uid = obj.metadata?.uid ?? '';
    const claims = plans.filter((p): p is FileL3Plan => p.backend === 'file');
    const wanted = new Set(claims.map((p) => p.claimName));
    const results = await Promise.all(
      claims.flatMap((p) =>
        p.claim
          ? [
              applyOwned(client, Resources.persistentVolumeClaims, p.claim as unknown as KubeObject, {
                live: l3Claims.get(ns, p.claimName) ?? null,
                ownerUid: uid,
              }),
            ]
          : [],
      ),
    );
    const refused = results.find((r) => !r.ok);
    if (refused && !refused.ok) refuseAdoption(obj, refused.error.message);
    const stale = l3Claims
      .list({ namespace: ns, labels: { [LABEL_DEPLOYMENT]: root.metadata.name ?? '' } })
      .filter((c) => controllerOf(c)?.uid === uid && !wanted.has(c.metadata?.name ?? ''));
    await Promise.all(
      stale.map((c) =>
        client.delete(Resources.persistentVolumeClaims, ns, c.metadata?.name ?? '', {
          uid: c.metadata?.uid ?? '',
        }),
      ),
    );
  }

  /**
   * HiCache's Mooncake stores (l3/mooncake.ts): the current identity's applied (with their
   * NetworkPolicy when the operator keeps runtime ones), an older identity's deleted once no pod
   * of it is left (a rollout's old replicas keep their store until they go).
   */
  async function applyMooncakeStores(
    obj: DeploymentObject,
    root: DeploymentResource,
    plans: readonly L3Plan[],
    applying: boolean,
  ): Promise<void> {
    if (!applying) return;
    const ns = root.metadata.namespace ?? '';
    const name = root.metadata.name ?? '';
    const uid = obj.metadata?.uid ?? '';
    const stores = plans.filter((p): p is MooncakePlan => p.backend === 'mooncake');
    const apply = (
      rt: ResourceType,
      o: KubeObject,
      cache?: { get(ns: string, n: string): KubeObject | undefined },
    ) =>
      applyOwned(client, rt, o, {
        ...(cache ? { live: cache.get(ns, o.metadata?.name ?? '') ?? null } : {}),
        ownerUid: uid,
      });
    const results = await Promise.all(
      stores.flatMap((p) => [
        apply(Resources.deployments, p.workload as unknown as KubeObject, workloads),
        apply(Resources.services, p.service as unknown as KubeObject, services),
        ...(opts.runtimeIngress
          ? [
              apply(
                Resources.networkPolicies,
                toKubeObject(buildMooncakeNetworkPolicy(root, p, opts.runtimeIngress.operator)),
                networkPolicies,
              ),
            ]
          : []),
      ]),
    );
    const refused = results.find((r) => !r.ok);
    if (refused && !refused.ok) refuseAdoption(obj, refused.error.message);
    const wanted = new Set(stores.map((p) => p.store));
    const running = new Set(
      pods
        .list({ namespace: ns, labels: { [LABEL_DEPLOYMENT]: name } })
        .map((p) => p.metadata?.labels?.[LABEL_FINGERPRINT] ?? ''),
    );
    const stale = workloads
      .list({ namespace: ns, labels: { [LABEL_L3_STORE]: name } })
      .filter(
        (w) =>
          controllerOf(w)?.uid === uid &&
          !wanted.has(w.metadata?.name ?? '') &&
          !running.has(w.metadata?.labels?.[LABEL_FINGERPRINT] ?? ''),
      );
    const gone = (rt: ResourceType, n: string, live: KubeObject | undefined) =>
      live && controllerOf(live)?.uid === uid
        ? client.delete(rt, ns, n, { uid: live.metadata?.uid ?? '' })
        : Promise.resolve();
    await Promise.all(
      stale.flatMap((w) => {
        const n = w.metadata?.name ?? '';
        const policy = buildMooncakeNetworkPolicyName(n);
        return [
          gone(Resources.deployments, n, w),
          gone(Resources.services, n, services.get(ns, n)),
          gone(Resources.networkPolicies, policy, networkPolicies.get(ns, policy)),
        ];
      }),
    );
  }

  /** The store pod of a Mooncake plan: its IP, and whether the kubelet says it is Ready. */
  function findStorePod(ns: string, p: MooncakePlan): StorePod | undefined {
    const pod = storePods
      .list({ namespace: ns, labels: { ...(p.workload.spec?.selector.matchLabels ?? {}) } })
      .find((q) => !q.metadata?.deletionTimestamp && q.status?.podIP);
    if (!pod) return undefined;
    const ready = (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
    return { ip: pod.status?.podIP ?? '', ready };
  }

  /** What status says of each L3 tier: the claims the operator made from its cache, a named one read; a store's master asked. */
  async function reportL3(
    next: DeploymentStatus,
    root: DeploymentResource,
    plans: readonly L3Plan[],
    ctx: ReconcileContext,
  ) {
    if (plans.length === 0) return;
    const ns = root.metadata.namespace ?? '';
    next.l3 = await Promise.all(
      plans.map(async (p) => {
        if (p.backend === 'mooncake') {
          const pod = findStorePod(ns, p);
          const gauges = pod?.ready
            ? await readMasterGauges(pod.ip, { timeoutMs: MOONCAKE_READ_TIMEOUT_MS, signal: ctx.signal })
            : undefined;
          return computeMooncakeStatus(p, pod, gauges);
        }
        return computeL3Status(
          p,
          p.managed
            ? l3Claims.get(ns, p.claimName)
            : await client.get<ClaimObject>(Resources.persistentVolumeClaims, ns, p.claimName),
        );
      }),
    );
  }

  /** The soonest this Deployment needs another pass without an event to bring it. */
  function computeRequeueMs(key: ObjectKey, awaitingRuntime: boolean, wakePlan: WakePlan): number {
    return Math.min(
      awaitingRuntime ? pendingRequeueMs : REVERIFY_AFTER_MS,
      wakePlan.recheckAfterMs ?? Infinity,
      // A key kept for its grace goes on the pass after.
      inGrace.has(formatKey(key)) ? keyGraceMs : Infinity,
    );
  }

  /** At replicas 0 with wakeOnDemand (both parts at 0 for a pair), what runs follows the tier's demand. */
  function followDemand(declared: DeploymentResource, key: ObjectKey, nowMs: number): WakePlan {
    return planWake({
      spec: declared.spec,
      status: declared.status?.wake,
      demandMs: wake?.demandOf(key),
      nowMs,
      watching: wake !== undefined,
    });
  }

  /** A spec that renders another identity under the deploymentId status accepted (nothing is applied). */
  function findIdentityConflict(
    root: DeploymentResource,
    desired: DesiredState,
  ): { accepted: string; refused: string } | undefined {
    const accepted = root.status?.identity;
    if (!accepted || accepted.deploymentId !== root.spec.deploymentId) return undefined;
    if (accepted.fingerprint === desired.fingerprint) return undefined;
    return { accepted: accepted.fingerprint, refused: desired.fingerprint };
  }

  /**
   * What keeps the workloads from being applied at all, said in status: a hostPath source outside
   * the operator's roots (host-path-roots.ts), or multi-node parts without the LWS API.
   */
  async function findBlock(
    root: DeploymentResource,
    desired: DesiredState,
  ): Promise<{ reason: string; message: string } | undefined> {
    const hostPath = root.spec.model.source.hostPath;
    const verdict = hostPath ? checkHostPath(hostPath.path, hostPathRoots, nodeCacheRoot) : undefined;
    if (verdict && !verdict.ok) return { reason: HOST_PATH_NOT_ALLOWED, message: verdict.message };
    if (desired.groupSets.length > 0 && !(await lwsApi.available(root.metadata.namespace ?? '')))
      return { reason: LEADER_WORKER_SET_MISSING, message: LEADER_WORKER_SET_MISSING_MESSAGE };
    return undefined;
  }

  async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const obj = roots.get(key.namespace, key.name);
    // Owned objects go with it (owner references); a model cache it was the last user of, here.
    if (!obj) return void (await modelDelivery.collect(key.namespace));
    if (obj.metadata?.deletionTimestamp) return;
    const parsed = validateResource(obj);
    if (!parsed.ok || parsed.value.kind !== 'Deployment') {
      const message = parsed.ok
        ? 'not a Deployment'
        : parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
      manager.events.event(obj, 'Warning', 'InvalidSpec', message);
      throw new TerminalError(message);
    }
    const wakePlan = followDemand(parsed.value, key, ctx.now().getTime());
    // Each part runs its DeploymentPart's replicas (an autoscaler's), not the declared ones; a
    // Deployment awake from zero, what its wake plan says (not written to any spec).
    const partPlans = planParts(parsed.value, (name) => livePart(key.namespace, name));
    const root = withWokenReplicas(withPartReplicas(parsed.value, partPlans), wakePlan);
    const desired = buildDesired(root, { modelCache: opts.modelCache });
    const identityConflict = findIdentityConflict(root, desired);
    const blocked = await findBlock(root, desired);
    // A changed identity under the same deploymentId is refused: nothing is applied.
    if (!identityConflict) await applyParts(obj, root, partPlans);
    const model = identityConflict || blocked ? undefined : await modelDelivery.deliver(root, ctx.now());
    if (model) await applyDesired(obj, root, desired, ctx, model.ready);
    const l3Plans = planL3(root, desired.engines, desired.fingerprint, l3Options);
    await applyL3Claims(obj, root, l3Plans, model !== undefined);
    await applyMooncakeStores(obj, root, l3Plans, model !== undefined);

    const ns = root.metadata.namespace ?? '';
    const byOwner = await sortByOwnership(
      obj,
      pods.list({ namespace: ns, labels: { [LABEL_DEPLOYMENT]: root.metadata.name ?? '' } }),
    );
    const endpoints = await observeEndpoints(root, desired, ctx, byOwner);
    // Only the Deployment's own pods count: one made by hand cannot fault it or change its replicas.
    const podObjects = byOwner.owned;
    const troubles = podObjects.map(computePodTrouble).filter((t) => t !== undefined);
    const next = computeStatus(
      {
        root,
        engines: desired.engines,
        fingerprint: desired.fingerprint,
        identityConflict,
        endpoints,
        troubles,
        // Replicas are groups: a group's workers are not counted (the scale subresource reads it).
        podCount: podObjects.filter((p) => !p.metadata?.deletionTimestamp && !isGroupWorker(p)).length,
        cache: cacheHealth ? chooseCacheVerdict(cacheHealth.assessmentOf(key), root.status) : undefined,
        model,
        blocked,
        sharedName: findEarlierClaimElsewhere(root, roots.list()),
      },
      ctx.now(),
    );
    if (wakePlan.status) next.wake = wakePlan.status;
    await reportL3(next, root, l3Plans, ctx);
    const partsStatus = computePartsStatus(partPlans, endpoints, root);
    if (partsStatus) next.parts = partsStatus;
    const { written } = await writeStatusIfChanged(client, Resources.sglangDeployments, obj, next);
    if (written)
      for (const e of planEvents(root.status, next)) manager.events.event(obj, e.type, e.reason, e.message);
    await markVerified(ns, podObjects, endpoints, ctx.now());

    // Pods that come, go or turn Ready queue this Deployment through the pod watch; only a Ready
    // pod whose runtime has not answered yet must be asked again without one.
    const awaitingRuntime = endpoints.some((e) => e.ready && e.reason === EndpointReason.VerificationFailed);
    const requeueAfterMs = Math.min(
      computeRequeueMs(key, awaitingRuntime, wakePlan),
      l3Plans.some((p) => p.backend === 'mooncake') ? MOONCAKE_REFRESH_MS : Infinity,
    );
    // Nothing watched brings the LWS CRD's arrival: look again.
    return { requeueAfterMs: blocked ? Math.min(requeueAfterMs, LWS_RECHECK_MS) : requeueAfterMs };
  }

  return {
    name: CONTROLLER,
    primary: Resources.sglangDeployments,
    owns: [
      Resources.deployments,
      Resources.services,
      Resources.secrets,
      Resources.networkPolicies,
      Resources.deploymentParts,
    ],
    watches: [
      ...modelDelivery.watches,
      // An L3 claim binding (or going) changes status.l3.
      {
        resource: Resources.persistentVolumeClaims,
        labelSelector: LABEL_L3,
        map: (c) => {
          const name = c.metadata?.labels?.[LABEL_DEPLOYMENT];
          return name ? [{ namespace: c.metadata?.namespace ?? '', name }] : [];
        },
      },
      // A Mooncake store's pod coming up (or going) changes status.l3.
      {
        resource: Resources.pods,
        labelSelector: LABEL_L3_STORE,
        map: (p) => {
          const name = p.metadata?.labels?.[LABEL_L3_STORE];
          return name ? [{ namespace: p.metadata?.namespace ?? '', name }] : [];
        },
      },
      // A claim of a served name coming or going changes ServedNameShared on the other namespaces'.
      {
        resource: Resources.sglangDeployments,
        map: (d) => mapSameServedName(d, roots.list()),
      },
      {
        resource: Resources.pods,
        labelSelector: POD_SELECTOR,
        map: (pod) => {
          const name = pod.metadata?.labels?.[LABEL_DEPLOYMENT];
          return name ? [{ namespace: pod.metadata?.namespace ?? '', name }] : [];
        },
      },
    ],
    reconciler: { reconcile },
    concurrency: opts.concurrency ?? 4,
  };
}
