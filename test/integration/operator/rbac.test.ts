// The operator's RBAC is exactly the requests its code makes, in both install modes.
// (a) The table below equals what the code declares: for every ControllerDefinition that
//     startOperator registers, the primary kind (informer, status writes), the owned
//     kinds (informer, server-side apply) and the watched kinds (informer), plus each
//     controller's direct reads and the runtime's fixed needs (Events, the Lease); and
//     the resource types the operator's source refers to are the table's. Every one is
//     namespaced, so the rules split into none on cluster-scoped resources and the rest.
//     The chart renders that table as a ClusterRole (operator.watchNamespaces empty: every
//     namespace) or as a Role in each watched namespace and no ClusterRole at all; the
//     paid-calls-ledger rule only with operator.paidCalls.allowed.
// (b) Run as the chart's ServiceAccount (a client certificate for its user name, given
//     rights only by the rendered RBAC objects), the operator reconciles a Deployment,
//     a CachePolicy and Tasks, writes status and Events and holds the Lease, with no
//     request denied by RBAC: cluster-wide with paid calls off (the only Secret written is
//     the Deployment's runtime API key Secret; its NetworkPolicy is applied too), and
//     namespaced with a paid call (the Secret, the ledger and the Lease in the watched
//     namespace), seeing nothing of a namespace outside the list.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { describe, expect, inject, it, onTestFinished, vi } from 'vitest';
import { LEDGER_CONFIGMAP, parseDailyCap } from '../../../operator/src/controllers/task/daily-cap.ts';
import { startOperator } from '../../../operator/src/operator.ts';
import { KubeClient } from '#kube/client.ts';
import type { RequestInfo } from '#kube/client.ts';
import type { Lease } from '../../../operator/src/manager/leader.ts';
import { createLogger, noopLogger } from '#kube/logger.ts';
import { Manager } from '../../../operator/src/manager/manager.ts';
import type { ControllerDefinition } from '../../../operator/src/manager/manager.ts';
import { createRequestCounter } from '../../../operator/src/manager/request-counter.ts';
import type { RequestCounter } from '../../../operator/src/manager/request-counter.ts';
import { Resources } from '#kube/resources.ts';
import type { ResourceType } from '#kube/resources.ts';
import { FIXTURE_API_KEY, startOpenRouterFixture } from '../../fixtures/openrouter/server.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../../support/builders.ts';
import { createUserKubeconfig } from '../../support/controlplane.ts';
import { installGieCrds } from '../../support/gie.ts';
import { helmTemplate } from '../../support/helm.ts';
import type { RenderedObject } from '../../support/helm.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';
import { loadSample, REPO_ROOT } from '../../support/samples.ts';
import { buildOpenRouterTaskManifest, buildSecretManifest } from '../../support/task-builders.ts';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

// ---- The table ---------------------------------------------------------------------
// The operator's rules: a ClusterRole when it watches every namespace, a Role in each
// watched namespace otherwise. `paidCallsOnly`: rendered only with paid calls allowed;
// `pickerOnly`: only with gateway.mode picker or both (the operator's --inference-pool-picker-*).
type TableRule = Rule & { paidCallsOnly?: true; pickerOnly?: true };
const OPERATOR_RULES: readonly TableRule[] = [
  // Primary kinds: informers; a Task is re-read after a status conflict.
  {
    apiGroups: ['cacheroute.dev'],
    resources: ['deployments', 'cachepolicies', 'tenants'],
    verbs: ['list', 'watch'],
  },
  {
    apiGroups: ['cacheroute.dev'],
    resources: ['tasks', 'qualifications'],
    verbs: ['get', 'list', 'watch'],
  },
  // Status through the status subresource (a PUT).
  {
    apiGroups: ['cacheroute.dev'],
    resources: [
      'deployments/status',
      'deploymentparts/status',
      'cachepolicies/status',
      'tasks/status',
      'tenants/status',
      'qualifications/status',
    ],
    verbs: ['update'],
  },
  // Owner references with blockOwnerDeletion: where OwnerReferencesPermissionEnforcement
  // is on (OpenShift, hardened clusters), setting one needs update on the owner's finalizers.
  {
    apiGroups: ['cacheroute.dev'],
    resources: ['deployments/finalizers', 'tasks/finalizers', 'qualifications/finalizers'],
    verbs: ['update'],
  },
  // Owned kinds: informers; server-side apply is a PATCH (dry runs too), one that
  // creates is also authorized as create; get reads outside the cache.
  { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
  {
    apiGroups: [''],
    resources: ['services', 'configmaps'],
    verbs: ['get', 'list', 'watch', 'create', 'patch'],
  },
  // The links between an SGLang pod and its workload, read to check its owner chain.
  { apiGroups: ['apps'], resources: ['replicasets', 'statefulsets'], verbs: ['get'] },
  // Each part of a disaggregated Deployment (DeploymentPart), owned: its replicas carried by a
  // merge patch, a PATCH as the apply is.
  {
    apiGroups: ['cacheroute.dev'],
    resources: ['deploymentparts'],
    verbs: ['get', 'list', 'watch', 'create', 'patch'],
  },
  // Each Deployment's runtime API key Secret, owned (its informer selects by label, RBAC
  // cannot); the same get reads an OpenRouter Task's key by name before a paid call.
  { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
  // Each Deployment's NetworkPolicy, owned; deleted when the operator runs without it.
  {
    apiGroups: ['networking.k8s.io'],
    resources: ['networkpolicies'],
    verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'],
  },
  // Multi-node Deployments' LeaderWorkerSets, owned but not cached (no informer on a CRD that
  // may be missing): a list tells the API is there, applies read each set with a get.
  {
    apiGroups: ['leaderworkerset.x-k8s.io'],
    resources: ['leaderworkersets'],
    verbs: ['get', 'list', 'create', 'patch'],
  },
  // Each Deployment's InferencePool (picker mode), owned but not cached (the GIE CRD may be
  // missing): a list tells the API is there, applies read each pool with a get.
  {
    apiGroups: ['inference.networking.k8s.io'],
    resources: ['inferencepools'],
    verbs: ['get', 'list', 'create', 'patch'],
    pickerOnly: true,
  },
  // The picker Service's mirror beside a pool outside the release namespace (picker-mirror.ts):
  // its EndpointSlice applied by name, read first with a get (the Service is granted above).
  {
    apiGroups: ['discovery.k8s.io'],
    resources: ['endpointslices'],
    verbs: ['get', 'create', 'patch'],
    pickerOnly: true,
  },
  // The daily-cap ledger of paid calls, by name: replaced with its resourceVersion.
  {
    apiGroups: [''],
    resources: ['configmaps'],
    resourceNames: [LEDGER_CONFIGMAP],
    verbs: ['update'],
    paidCallsOnly: true,
  },
  // Model caches (a claim per namespace and digests: created, patched for owners and the
  // verified record, deleted unused) and their fetch Jobs (created, read, deleted first);
  // HiCache L3 claims (applied, deleted unused; one a user names is read for status).
  {
    apiGroups: [''],
    resources: ['persistentvolumeclaims'],
    verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'],
  },
  { apiGroups: ['batch'], resources: ['jobs'], verbs: ['list', 'watch', 'create', 'patch', 'delete'] },
  // Pods of our deployments and of the fetch Jobs: the informers select by label, RBAC cannot.
  { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
  // The cacheroute.dev/verified readiness gate: the pod condition, a strategic merge PATCH of pods/status.
  { apiGroups: [''], resources: ['pods/status'], verbs: ['patch'] },
  // Tasks' generation Leases, in the Task's namespace.
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] },
  // Event recorder: new Events are created, repeats patch the series.
  { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
];

const operatorRules = (o: { paidCalls: boolean; picker?: boolean }): Rule[] =>
  OPERATOR_RULES.filter((r) => (o.paidCalls || !r.paidCallsOnly) && (o.picker === true || !r.pickerOnly)).map(
    (r) => ({
      apiGroups: r.apiGroups,
      resources: r.resources,
      verbs: r.verbs,
      ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
    }),
  );

// Role in the release namespace: the leader Lease (leader.ts reads, creates, replaces).
const leaderRules = (leaseName: string): Rule[] => [
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
  {
    apiGroups: ['coordination.k8s.io'],
    resources: ['leases'],
    resourceNames: [leaseName],
    verbs: ['get', 'update'],
  },
];

// Role in the release namespace (picker mode): the picker Service and its EndpointSlices, which
// the InferencePool controller mirrors into the Deployments' namespaces (informers there only).
const pickerRules: Rule[] = [
  { apiGroups: [''], resources: ['services'], verbs: ['list', 'watch'] },
  { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
];

// Role in the release namespace: the gateway's keys Secret (controllers/gateway-keys), written by
// server-side apply (a PATCH) by name; the chart makes it, so no create.
const gatewayKeysRules = (secretName: string): Rule[] => [
  { apiGroups: [''], resources: ['secrets'], resourceNames: [secretName], verbs: ['patch'] },
];

// The external metrics API (operator.metricsApi): delegated authorization. The chart grants it
// through the built-in roles every aggregated API server binds (templates/operator-metrics-api.yaml):
// system:auth-delegator (SubjectAccessReviews) and, in kube-system,
// extension-apiserver-authentication-reader (that one ConfigMap).
const metricsApiRules: Rule[] = [
  { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
  {
    apiGroups: [''],
    resources: ['configmaps'],
    resourceNames: ['extension-apiserver-authentication'],
    verbs: ['get'],
  },
];

// ---- How the code's declarations become grants ---------------------------------------
const LIST_WATCH = ['list', 'watch'];
// applyOwned: cache-checked SSA (patch, create when new), get on the refusal path.
const APPLY = ['get', 'list', 'watch', 'create', 'patch'];
// Requests beside the informers, applyOwned and the status write, per controller, read
// from its reconciler. A controller without an entry has not been reviewed: the test fails.
// `paidCallsOnly`: made only on a paid call, which the operator makes only with
// --allow-paid-calls=true (target.ts: an OpenRouter Task is otherwise TargetNotRoutable).
interface DirectRequest {
  rt: ResourceType;
  verbs: string[];
  subresource?: string;
  resourceNames?: string[];
  paidCallsOnly?: true;
}
const DIRECT_REQUESTS: Record<string, DirectRequest[]> = {
  // A new runtime API key only after a live read of the key Secret (owned: already granted);
  // the NetworkPolicy made earlier is deleted when the operator runs without one.
  deployment: [
    { rt: Resources.secrets, verbs: ['get'] },
    { rt: Resources.networkPolicies, verbs: ['delete'] },
    // model-cache/shell.ts: a cache is created, patched (owners, verified record) and deleted
    // when unused; its Job created, and deleted before an unused claim; a pvc source's verify
    // Job created, patched (verified record) and deleted when stale. Their informers come from
    // the controller's watches.
    { rt: Resources.persistentVolumeClaims, verbs: ['create', 'patch', 'delete'] },
    // l3/: a HiCache L3 claim a user names (hicache.storage.volume.claimName) is read for status.
    { rt: Resources.persistentVolumeClaims, verbs: ['get'] },
    { rt: Resources.jobs, verbs: ['create', 'patch', 'delete'] },
    // LeaderWorkerSets (multi-node/): applyOwned with a GET for the live set, a list for the API.
    { rt: Resources.leaderWorkerSets, verbs: ['get', 'list', 'create', 'patch'] },
    // A pod's owner chain (ownership.ts), read before the runtime API key is sent to it.
    { rt: Resources.replicaSets, verbs: ['get'] },
    { rt: Resources.statefulSets, verbs: ['get'] },
    // The verified readiness gate (readiness-gate/): the pod condition, by a PATCH of pods/status.
    { rt: Resources.pods, verbs: ['patch'], subresource: 'status' },
  ],
  // InferencePools (picker mode): applyOwned with a GET for the live pool, a list for the API.
  // The picker's mirror: its EndpointSlice applied with a GET for the live one (the Service comes
  // from the Services informer).
  inferencepool: [
    { rt: Resources.inferencePools, verbs: ['get', 'list', 'create', 'patch'] },
    { rt: Resources.endpointSlices, verbs: ['get', 'create', 'patch'] },
  ],
  // A Tenant's Ready condition reads only informer caches (never its key Secret: the gateway judges keys).
  tenant: [],
  // The gateway's keys Secret: informer caches in, one server-side apply out, by name in the
  // gateway's namespace (gatewayKeysRules, its own Role; not part of this table).
  'gateway-keys': [],
  // A DeploymentPart's status reads only informer caches (the pods of its part).
  deploymentpart: [],
  // Warm-up documents.
  cachepolicy: [{ rt: Resources.configMaps, verbs: ['get'] }],
  // Input and result ConfigMaps by name (owned: already granted), the API key Secret of a
  // paid call, the generation Lease, the Task re-read after a status conflict; the daily-cap
  // ledger of paid calls (daily-cap-store.ts: get, create, then replace by name).
  task: [
    { rt: Resources.configMaps, verbs: ['get', 'create'] },
    { rt: Resources.configMaps, verbs: ['update'], resourceNames: [LEDGER_CONFIGMAP], paidCallsOnly: true },
    { rt: Resources.secrets, verbs: ['get'], paidCallsOnly: true },
    { rt: Resources.leases, verbs: ['get', 'create', 'update'] },
    { rt: Resources.tasks, verbs: ['get'] },
  ],
  // The trace and the record ConfigMap by name (the record: server-side apply, already granted),
  // the Qualification re-read after each sample.
  qualification: [
    { rt: Resources.configMaps, verbs: ['get'] },
    { rt: Resources.qualifications, verbs: ['get'] },
  ],
};
// The runtime's own requests outside any controller (events.ts).
const RUNTIME_CLUSTER_NEEDS = [{ rt: Resources.events, verbs: ['create', 'patch'] }];

// One `group/resource[/sub] verb [name]` string per permission.
function expand(rules: readonly Rule[]): string[] {
  const out = rules.flatMap((r) =>
    r.apiGroups.flatMap((g) =>
      r.resources.flatMap((res) =>
        r.verbs.flatMap((v) =>
          (r.resourceNames ?? ['']).map((n) => `${g || 'core'}/${res} ${v}${n ? ` ${n}` : ''}`),
        ),
      ),
    ),
  );
  return [...new Set(out)].sort();
}

function grant(rt: ResourceType, verbs: readonly string[], sub?: string): Rule {
  return {
    apiGroups: [rt.group],
    resources: [sub ? `${rt.resource}/${sub}` : rt.resource],
    verbs: [...verbs],
  };
}

// The rules the code needs, split by the scope of the resource: namespaced ones can be
// granted by a Role in each watched namespace, cluster-scoped ones only by a ClusterRole.
function deriveRules(
  defs: readonly ControllerDefinition[],
  o: { paidCalls: boolean },
): { namespaced: Rule[]; clusterScoped: Rule[]; oneNamespace: Rule[] } {
  const needs: { rt: ResourceType; rule: Rule }[] = RUNTIME_CLUSTER_NEEDS.map((n) => ({
    rt: n.rt,
    rule: grant(n.rt, n.verbs),
  }));
  const need = (rt: ResourceType, rule: Rule): void => void needs.push({ rt, rule });
  // Watches of one named namespace (Watch.namespace: the picker's), granted by a Role there.
  const oneNamespace: Rule[] = [];
  for (const d of defs) {
    need(d.primary, grant(d.primary, LIST_WATCH));
    need(d.primary, grant(d.primary, ['update'], 'status'));
    for (const rt of d.owns ?? []) {
      need(rt, grant(rt, APPLY));
      need(d.primary, grant(d.primary, ['update'], 'finalizers'));
    }
    for (const w of d.watches ?? [])
      if (w.namespace === undefined) need(w.resource, grant(w.resource, LIST_WATCH));
      else oneNamespace.push(grant(w.resource, LIST_WATCH));
    for (const r of DIRECT_REQUESTS[d.name] ?? []) {
      if (r.paidCallsOnly && !o.paidCalls) continue;
      need(r.rt, {
        ...grant(r.rt, r.verbs, r.subresource),
        ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
      });
    }
  }
  return {
    namespaced: needs.filter((n) => n.rt.namespaced).map((n) => n.rule),
    clusterScoped: needs.filter((n) => !n.rt.namespaced).map((n) => n.rule),
    oneNamespace,
  };
}

// The definitions startOperator really registers, without starting anything.
async function registeredDefinitions(kubeconfig: string, picker = false): Promise<ControllerDefinition[]> {
  const added = vi.spyOn(Manager.prototype, 'addController');
  const start = vi.spyOn(Manager.prototype, 'start').mockResolvedValue();
  try {
    const op = await startOperator({
      kubeconfig,
      logger: noopLogger,
      leaderElection: false,
      http: false,
      ...(picker
        ? { picker: { namespace: 'cacheroute-system', name: 'cr-cacheroute-picker', port: 9002 } }
        : {}),
      gatewayKeysSecret: { namespace: 'cacheroute-system', name: 'gateway-keys' },
    });
    await op.stop();
    return added.mock.calls.map(([def]) => def);
  } finally {
    added.mockRestore();
    start.mockRestore();
  }
}

// A relative import, or one of the shared library's (package.json's `#kube/*`, `#api/*` ...).
function resolveImport(file: string, spec: string): string {
  const lib = /^#(\w+)\/(.*)$/.exec(spec);
  return lib ? join(REPO_ROOT, 'lib', lib[1] ?? '', lib[2] ?? '') : resolve(dirname(file), spec);
}

// Every runtime resource type named in the code startOperator runs (files reachable by
// relative or library imports from operator.ts), as `group/resource`.
function referencedResources(): string[] {
  const resourcesFile = join(REPO_ROOT, 'lib/kube/resources.ts');
  const seen = new Set<string>();
  const found = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const src = readFileSync(file, 'utf8');
    const imports = [...src.matchAll(/from '((?:\.|#)[^']+\.ts)'/g)].map((m) =>
      resolveImport(file, m[1] ?? ''),
    );
    imports.forEach(visit);
    const usesRuntimeResources = [...src.matchAll(/import \{([^}]*)\} from '((?:\.|#)[^']+\.ts)'/g)].some(
      (m) => /\bResources\b/.test(m[1] ?? '') && resolveImport(file, m[2] ?? '') === resourcesFile,
    );
    if (!usesRuntimeResources) return;
    for (const m of src.matchAll(/\bResources\.(\w+)/g)) {
      const rt = (Resources as Record<string, ResourceType | undefined>)[m[1] ?? ''];
      if (rt) found.add(`${rt.group || 'core'}/${rt.resource}`);
    }
  };
  visit(join(REPO_ROOT, 'operator/src/operator.ts'));
  return [...found].sort();
}

const resourcesOf = (rules: readonly Rule[]): string[] =>
  [...new Set(expand(rules).map((g) => g.split(' ')[0]?.split('/').slice(0, 2).join('/') ?? ''))].sort();

// The chart also renders the gateway and more: the operator's identity objects only.
const IDENTITY_KINDS = ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'];
const operatorIdentity = (objects: readonly RenderedObject[]): RenderedObject[] =>
  objects.filter(
    (o) =>
      IDENTITY_KINDS.includes(o.kind) && o.metadata.labels?.['app.kubernetes.io/component'] === 'operator',
  );

const ofKind = (objects: readonly RenderedObject[], kind: string): RenderedObject[] =>
  operatorIdentity(objects).filter((o) => o.kind === kind);

// The rules of the one operator object of this kind, name (and namespace).
function rulesOf(objects: readonly RenderedObject[], kind: string, name: string, namespace?: string): Rule[] {
  const found = ofKind(objects, kind).filter(
    (o) => o.metadata.name === name && (namespace === undefined || o.metadata.namespace === namespace),
  );
  expect(found, `one ${kind} ${namespace ?? ''}/${name}`).toHaveLength(1);
  return (found[0]?.['rules'] as Rule[] | undefined) ?? [];
}

const operatorArgs = (objects: readonly RenderedObject[]): string[] => {
  const d = objects.find((o) => o.kind === 'Deployment' && o.metadata.name.endsWith('-operator')) as
    { spec: { template: { spec: { containers: { args: string[] }[] } } } } | undefined;
  return d?.spec.template.spec.containers[0]?.args ?? [];
};

const kubeconfig = inject('kubeconfig');
const controlPlane = inject('controlPlane');

describe('chart RBAC equals what the code uses', () => {
  it('every namespace: the rendered ClusterRole and leader Role are the table', async () => {
    const objects = await helmTemplate({ release: 'cr', namespace: 'cacheroute-system' });
    expect(expand(rulesOf(objects, 'ClusterRole', 'cr-cacheroute-operator'))).toEqual(
      expand(operatorRules({ paidCalls: false })),
    );
    const paid = await helmTemplate({
      release: 'cr',
      namespace: 'cacheroute-system',
      values: { 'operator.paidCalls.allowed': 'true' },
    });
    expect(expand(rulesOf(paid, 'ClusterRole', 'cr-cacheroute-operator'))).toEqual(
      expand(operatorRules({ paidCalls: true })),
    );
    for (const mode of ['picker', 'both']) {
      const picker = await helmTemplate({
        release: 'cr',
        namespace: 'cacheroute-system',
        values: { 'gateway.mode': mode },
      });
      expect(expand(rulesOf(picker, 'ClusterRole', 'cr-cacheroute-operator'))).toEqual(
        expand(operatorRules({ paidCalls: false, picker: true })),
      );
      expect(expand(rulesOf(picker, 'Role', 'cr-cacheroute-operator-picker', 'cacheroute-system'))).toEqual(
        expand(pickerRules),
      );
      expect(operatorArgs(picker).filter((a) => a.startsWith('--inference-pool-picker'))).toEqual([
        '--inference-pool-picker-service=cr-cacheroute-picker',
        '--inference-pool-picker-namespace=cacheroute-system',
        '--inference-pool-picker-port=9002',
      ]);
    }
    expect(operatorArgs(objects).filter((a) => a.startsWith('--inference-pool-picker'))).toEqual([]);
    // No Role but the leader's and the gateway keys Secret's, and no --namespace: the operator
    // watches everything.
    expect(ofKind(objects, 'Role').map((o) => o.metadata.name)).toEqual([
      'cr-cacheroute-operator-leader-election',
      'cr-cacheroute-operator-gateway-keys',
    ]);
    expect(
      expand(rulesOf(objects, 'Role', 'cr-cacheroute-operator-gateway-keys', 'cacheroute-system')),
    ).toEqual(expand(gatewayKeysRules('cr-cacheroute-gateway-keys')));
    expect(operatorArgs(objects)).toContain(
      '--gateway-keys-secret=cacheroute-system/cr-cacheroute-gateway-keys',
    );
    expect(operatorArgs(objects).filter((a) => a.startsWith('--namespace'))).toEqual([]);
    expect(
      expand(rulesOf(objects, 'Role', 'cr-cacheroute-operator-leader-election', 'cacheroute-system')),
    ).toEqual(expand(leaderRules('cacheroute-operator')));
    const other = await helmTemplate({
      release: 'cr',
      namespace: 'ops',
      values: { 'operator.leaderElection.leaseName': 'my-lease' },
    });
    expect(expand(rulesOf(other, 'Role', 'cr-cacheroute-operator-leader-election', 'ops'))).toEqual(
      expand(leaderRules('my-lease')),
    );
    // Bring-your-own identity: no ServiceAccount, or no RBAC objects at all.
    const byo = await helmTemplate({
      release: 'cr',
      namespace: 'ops',
      values: { 'operator.serviceAccount.create': 'false', 'operator.serviceAccount.name': 'mine' },
    });
    expect(operatorIdentity(byo).map((o) => o.kind)).not.toContain('ServiceAccount');
    expect(operatorIdentity(byo).find((o) => o.kind === 'RoleBinding')?.['subjects']).toEqual([
      { kind: 'ServiceAccount', name: 'mine', namespace: 'ops' },
    ]);
    const none = await helmTemplate({
      release: 'cr',
      namespace: 'ops',
      values: { 'operator.rbac.create': 'false' },
    });
    expect(operatorIdentity(none).map((o) => o.kind)).toEqual(['ServiceAccount']);
    // Both bindings grant the operator's ServiceAccount and nobody else.
    const sa = operatorIdentity(objects).find((o) => o.kind === 'ServiceAccount');
    expect(sa?.metadata).toMatchObject({ name: 'cr-cacheroute-operator', namespace: 'cacheroute-system' });
    for (const kind of ['ClusterRoleBinding', 'RoleBinding']) {
      const b = operatorIdentity(objects).find((o) => o.kind === kind);
      expect(b?.['subjects']).toEqual([
        { kind: 'ServiceAccount', name: 'cr-cacheroute-operator', namespace: 'cacheroute-system' },
      ]);
    }
  });

  it.each([false, true])(
    'operator.watchNamespaces (paid calls %s): a Role of the table in each, the leader Role, no ClusterRole',
    async (paidCalls) => {
      const objects = await helmTemplate({
        release: 'cr',
        namespace: 'cacheroute-system',
        values: {
          'operator.watchNamespaces': '{team-a,team-b}',
          'operator.paidCalls.allowed': String(paidCalls),
        },
      });
      expect(ofKind(objects, 'ClusterRole')).toEqual([]);
      expect(ofKind(objects, 'ClusterRoleBinding')).toEqual([]);
      for (const ns of ['team-a', 'team-b'])
        expect(expand(rulesOf(objects, 'Role', 'cr-cacheroute-operator', ns))).toEqual(
          expand(operatorRules({ paidCalls })),
        );
      expect(
        expand(rulesOf(objects, 'Role', 'cr-cacheroute-operator-leader-election', 'cacheroute-system')),
      ).toEqual(expand(leaderRules('cacheroute-operator')));
      expect(
        ofKind(objects, 'Role')
          .map((o) => `${o.metadata.namespace}/${o.metadata.name}`)
          .sort(),
      ).toEqual([
        'cacheroute-system/cr-cacheroute-operator-gateway-keys',
        'cacheroute-system/cr-cacheroute-operator-leader-election',
        'team-a/cr-cacheroute-operator',
        'team-b/cr-cacheroute-operator',
      ]);
      const bindings = ofKind(objects, 'RoleBinding');
      expect(bindings.map((b) => b.metadata.namespace).sort()).toEqual([
        'cacheroute-system',
        'cacheroute-system',
        'team-a',
        'team-b',
      ]);
      for (const b of bindings)
        expect(b['subjects']).toEqual([
          { kind: 'ServiceAccount', name: 'cr-cacheroute-operator', namespace: 'cacheroute-system' },
        ]);
      // The operator watches exactly the namespaces its Roles are in.
      expect(operatorArgs(objects).filter((a) => a.startsWith('--namespace'))).toEqual([
        '--namespace=team-a,team-b',
      ]);
    },
  );

  it('the table is derived from the controllers startOperator registers and the runtime', async () => {
    for (const picker of [false, true]) {
      const defs = await registeredDefinitions(kubeconfig, picker);
      // A controller without an entry here has not had its direct reads reviewed.
      expect(defs.map((d) => d.name).sort()).toEqual(
        Object.keys(DIRECT_REQUESTS)
          .filter((name) => picker || name !== 'inferencepool')
          .sort(),
      );
      for (const paidCalls of [false, true]) {
        const derived = deriveRules(defs, { paidCalls });
        // Nothing cluster-scoped: a namespaced install needs no ClusterRole at all.
        expect(derived.clusterScoped).toEqual([]);
        expect(expand(derived.namespaced)).toEqual(expand(operatorRules({ paidCalls, picker })));
        expect(expand(derived.oneNamespace)).toEqual(picker ? expand(pickerRules) : []);
      }
    }
  });

  it('the resource types the operator source names are exactly the table', () => {
    expect(referencedResources()).toEqual(
      resourcesOf([
        ...operatorRules({ paidCalls: true, picker: true }),
        ...pickerRules,
        ...leaderRules('x'),
        ...metricsApiRules,
      ]),
    );
  });
});

// ---- (b) the operator under that identity ---------------------------------------------

// Counts every request of the next KubeClient created (the operator's), from its first.
function countNextClient(counter: RequestCounter): void {
  const original = KubeClient.fromKubeConfig.bind(KubeClient);
  const spy = vi
    .spyOn(KubeClient, 'fromKubeConfig')
    .mockImplementationOnce((kc, opts = {}) =>
      original(kc, { ...opts, observers: [...(opts.observers ?? []), counter.observe] }),
    );
  onTestFinished(() => spy.mockRestore());
}

interface Identity {
  user: string;
  groups: string[];
}

// Whether RBAC allows a request (as the API server authorizes it), by SubjectAccessReview.
async function isAllowed(who: Identity, r: RequestInfo): Promise<boolean> {
  const dot = r.resource.indexOf('.');
  const [resource, group] =
    dot < 0 ? [r.resource, ''] : [r.resource.slice(0, dot), r.resource.slice(dot + 1)];
  // An apply that creates is authorized as patch and as create.
  const verbs = r.verb === 'apply' ? ['patch', 'create'] : [r.verb];
  for (const verb of verbs) {
    const sar = {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: who.user,
        groups: who.groups,
        resourceAttributes: {
          verb,
          group,
          resource,
          ...(r.subresource ? { subresource: r.subresource } : {}),
          ...(r.namespace ? { namespace: r.namespace } : {}),
        },
      },
    };
    const out = await kubectlOk(['create', '-o', 'json', '-f', '-'], {
      kubeconfig,
      input: JSON.stringify(sar),
    });
    if (!(JSON.parse(out) as { status?: { allowed?: boolean } }).status?.allowed) return false;
  }
  return true;
}

async function getJson<T>(args: string[], who = kubeconfig): Promise<T> {
  return JSON.parse(await kubectlOk([...args, '-o', 'json'], { kubeconfig: who })) as T;
}

// The chart's operator RBAC objects, as rendered for these values under a release name
// of the test's own, applied; and a kubeconfig that authenticates as its ServiceAccount.
async function chartIdentity(
  ns: string,
  values: Record<string, string>,
  kinds: readonly string[],
): Promise<{ who: Identity; userKubeconfig: string; release: string }> {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
  const release = `r${randomBytes(2).toString('hex')}`;
  const objects = operatorIdentity(await helmTemplate({ release, namespace: ns, values }));
  expect(objects.map((o) => o.kind).sort()).toEqual([...kinds].sort());
  const list = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects });
  await kubectlOk(['apply', '-f', '-'], { kubeconfig, input: list });
  onTestFinished(async () => {
    await kubectl(['delete', '--ignore-not-found', '--wait=false', '-f', '-'], { kubeconfig, input: list });
  });
  const sa = objects.find((o) => o.kind === 'ServiceAccount')?.metadata.name ?? '';
  const who: Identity = {
    user: `system:serviceaccount:${ns}:${sa}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`],
  };
  return { who, userKubeconfig: await createUserKubeconfig(controlPlane, who), release };
}

const applyIn = (ns: string, manifest: unknown): Promise<string> =>
  kubectlOk(['apply', '-n', ns, '-f', '-'], { kubeconfig, input: JSON.stringify(manifest) });

interface TaskView {
  status?: {
    phase?: string;
    observedGeneration?: number;
    conditions?: { type: string; reason?: string }[];
  };
}

describe('the operator as the chart ServiceAccount', () => {
  it('every namespace: reconciles a Deployment, a CachePolicy and Tasks with no request denied by RBAC', async () => {
    // Short names: the user name is a certificate CN (64 characters at most).
    const ns = await createTestNamespace(kubeconfig, 'rbac');
    const work = await createTestNamespace(kubeconfig, 'op-rbac-work');
    const { who, userKubeconfig } = await chartIdentity(ns, {}, [
      'ClusterRole',
      'ClusterRoleBinding',
      'Role',
      'Role',
      'RoleBinding',
      'RoleBinding',
      'ServiceAccount',
    ]);

    // Not an admin: allowed what the table says, and nothing beside it.
    const canI = async (...args: string[]): Promise<boolean> =>
      (await kubectl(['auth', 'can-i', ...args], { kubeconfig: userKubeconfig })).code === 0;
    expect(await canI('list', 'pods', '--all-namespaces')).toBe(true);
    expect(await canI('patch', 'deployments.apps', '-n', work)).toBe(true);
    // Secrets: the runtime API key Secrets it keeps (its informer selects them by label; RBAC
    // cannot), applied, never replaced or deleted.
    expect(await canI('list', 'secrets', '-n', work)).toBe(true);
    expect(await canI('patch', 'secrets', '-n', work)).toBe(true);
    expect(await canI('update', 'secrets', '-n', work)).toBe(false);
    expect(await canI('delete', 'secrets', '-n', work)).toBe(false);
    expect(await canI('delete', 'networkpolicies.networking.k8s.io', '-n', work)).toBe(true);
    // Paid calls are off by default: no ledger.
    expect(await canI('update', `configmaps/${LEDGER_CONFIGMAP}`, '-n', work)).toBe(false);
    expect(await canI('delete', 'deployments.apps', '-n', work)).toBe(false);
    expect(await canI('update', 'deployments.cacheroute.dev', '-n', work)).toBe(false);
    expect(await canI('delete', 'configmaps', '-n', work)).toBe(false);
    expect(await canI('delete', 'leases.coordination.k8s.io', '-n', ns)).toBe(false);
    expect(await canI('create', 'pods', '-n', work)).toBe(false);

    await applyIn(work, buildDeploymentManifest({ name: 'llama-8b', replicas: 1 }));
    // A disaggregated one too: its parts are DeploymentParts (owned, replicas patched, status written).
    await applyIn(
      work,
      buildDeploymentManifest({
        name: 'pd',
        sample: 'deployment-pd-hisparse.yaml',
        spec: { parallelism: { tensor: 2 } },
        gpus: 2,
      }),
    );
    await applyIn(work, buildCachePolicyManifest('team-a', ['llama-8b']));
    await applyIn(work, loadSample('tenant.yaml'));
    // A Task on that Deployment (no endpoint yet: it gets as far as its status says).
    await applyIn(work, loadSample('task-sglang.yaml'));
    // An OpenRouter Task while paid calls are off: refused before its Secret is read.
    await applyIn(work, buildSecretManifest('openrouter', { 'api-key': FIXTURE_API_KEY }));
    await applyIn(
      work,
      buildOpenRouterTaskManifest({
        name: 'paid',
        prompt: 'Say hello.',
        secret: { name: 'openrouter', key: 'api-key' },
      }),
    );

    const counter = createRequestCounter();
    countNextClient(counter);
    const op = await startOperator({
      kubeconfig: userKubeconfig,
      logger: createLogger({ level: 'error', fields: { component: 'operator' } }),
      leaderElection: { namespace: ns, name: 'cacheroute-operator' },
      http: false,
      // As the chart runs it by default (operator.runtimeNetworkPolicy.enabled).
      runtimeIngress: {
        gateway: { namespace: ns, podLabels: { 'app.kubernetes.io/component': 'gateway' } },
        operator: { namespace: ns, podLabels: { 'app.kubernetes.io/component': 'operator' } },
      },
    });
    let stopped = false;
    onTestFinished(async () => {
      if (!stopped) await op.stop();
    });

    // Owned objects, applied with a controller reference that blocks owner deletion.
    const workload = await eventually(() =>
      getJson<{ metadata: { ownerReferences?: unknown[] } }>([
        'get',
        'deployment.apps',
        'llama-8b-sglang',
        '-n',
        work,
      ]),
    );
    expect(workload.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        kind: 'Deployment',
        name: 'llama-8b',
        controller: true,
        blockOwnerDeletion: true,
      }),
    ]);
    await eventually(() => getJson(['get', 'service', 'llama-8b-sglang', '-n', work]));
    for (const owned of ['secret/llama-8b-runtime-api-key', 'networkpolicy/llama-8b-runtime-ingress']) {
      const o = await eventually(() =>
        getJson<{ metadata: { ownerReferences?: unknown[] } }>(['get', owned, '-n', work]),
      );
      expect(o.metadata.ownerReferences, owned).toEqual([
        expect.objectContaining({ kind: 'Deployment', name: 'llama-8b', controller: true }),
      ]);
    }
    const part = await eventually(async () => {
      const p = await getJson<{
        metadata: { ownerReferences?: unknown[] };
        spec: { replicas?: number };
        status?: { selector?: string };
      }>(['get', 'sgdpart', 'pd-prefill', '-n', work]);
      expect(p.spec.replicas).toBe(1);
      expect(p.status?.selector).toBe('cacheroute.dev/deployment=pd,cacheroute.dev/role=prefill');
      return p;
    });
    expect(part.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Deployment', name: 'pd', controller: true, blockOwnerDeletion: true }),
    ]);
    // Status of both kinds, through their status subresources.
    await eventually(async () => {
      const d = await getJson<{ status?: { observedGeneration?: number; conditions?: { type: string }[] } }>([
        'get',
        'sgd',
        'llama-8b',
        '-n',
        work,
      ]);
      expect(d.status?.observedGeneration).toBe(1);
      expect(d.status?.conditions?.map((c) => c.type)).toContain('Ready');
    });
    await eventually(async () => {
      const p = await getJson<{ status?: { targets?: { name: string; accepted: boolean }[] } }>([
        'get',
        'cachepolicies.cacheroute.dev',
        'team-a',
        '-n',
        work,
      ]);
      expect(p.status?.targets).toEqual([expect.objectContaining({ name: 'llama-8b', accepted: true })]);
    });
    // The sample Tenant names llama-8b and two models this namespace does not have.
    await eventually(async () => {
      const t = await getJson<{
        status?: { conditions?: { type: string; reason: string; message: string }[] };
      }>(['get', 'tenants.cacheroute.dev', 'team-a', '-n', work]);
      expect(t.status?.conditions).toEqual([
        expect.objectContaining({
          type: 'Ready',
          reason: 'ModelNotFound',
          message: expect.stringContaining('no Deployment qwen-32b, deepseek-v32'),
        }),
      ]);
    });
    const task = await eventually(async () => {
      const t = await getJson<TaskView>([
        'get',
        'tasks.cacheroute.dev',
        'summarize-release-notes',
        '-n',
        work,
      ]);
      expect(t.status?.observedGeneration).toBe(1);
      return t;
    });
    console.log(`operator-rbac: the Task reached phase ${task.status?.phase ?? '(none)'}`);
    await eventually(async () => {
      const t = await getJson<TaskView>(['get', 'tasks.cacheroute.dev', 'paid', '-n', work]);
      // Not routable (it waits a while for the target, then fails): nothing is sent.
      expect(t.status?.observedGeneration).toBe(1);
      expect(t.status?.conditions).toContainEqual(
        expect.objectContaining({ type: 'Progressing', reason: 'TargetNotRoutable' }),
      );
    });
    // Events, and the Lease.
    await op.manager.events.flush();
    await eventually(async () => {
      const events = await getJson<{
        items: { reportingController?: string; regarding?: { kind?: string } }[];
      }>(['get', 'events.events.k8s.io', '-n', work]);
      const ours = events.items.filter((e) => e.reportingController === 'cacheroute.dev/operator');
      // A Deployment without pods has no state change worth an Event yet; the policy's Accepted has.
      expect(ours.map((e) => e.regarding?.kind)).toContain('CachePolicy');
    });
    expect(op.manager.isLeader()).toBe(true);
    const lease = await getJson<Lease>(['get', 'lease', 'cacheroute-operator', '-n', ns]);
    expect(lease.spec?.holderIdentity).toBeTruthy();

    // A clean stop releases the Lease, with the same rights.
    stopped = true;
    await op.stop();
    const released = await getJson<Lease>(['get', 'lease', 'cacheroute-operator', '-n', ns]);
    expect(released.spec?.holderIdentity ?? '').toBe('');

    const requests = counter.requests();
    const seen = counter.snapshot().byVerbResource;
    for (const used of [
      'get leases.coordination.k8s.io',
      'create leases.coordination.k8s.io',
      'update leases.coordination.k8s.io',
      'list deployments.cacheroute.dev',
      'list cachepolicies.cacheroute.dev',
      'list tasks.cacheroute.dev',
      'list configmaps',
      'list deployments.apps',
      'list services',
      'list pods',
      'list secrets',
      'list networkpolicies.networking.k8s.io',
      'apply deployments.apps',
      'apply services',
      'apply secrets',
      'apply networkpolicies.networking.k8s.io',
      'update deployments.cacheroute.dev/status',
      'list deploymentparts.cacheroute.dev',
      'apply deploymentparts.cacheroute.dev',
      'patch deploymentparts.cacheroute.dev',
      'update deploymentparts.cacheroute.dev/status',
      'update cachepolicies.cacheroute.dev/status',
      'update tasks.cacheroute.dev/status',
      'list tenants.cacheroute.dev',
      'update tenants.cacheroute.dev/status',
      'create events.events.k8s.io',
    ])
      expect(seen[used], used).toBeGreaterThan(0);
    // Without paid calls the code touches Secrets only as the owner of runtime key Secrets:
    // informer, the live read before a new key, server-side apply; never a replace or delete.
    expect([...new Set(requests.filter((r) => r.resource === 'secrets').map((r) => r.verb))].sort()).toEqual(
      expect.arrayContaining(['apply', 'list']),
    );
    for (const r of requests.filter((x) => x.resource === 'secrets'))
      expect(['get', 'list', 'watch', 'apply'], `${r.verb} secrets`).toContain(r.verb);
    expect(requests.filter((r) => r.code === 401)).toEqual([]);
    // The shared plane may hold other tests' objects in Terminating namespaces, where
    // admission (not RBAC) forbids new objects: a 403 counts only if RBAC denies it.
    const forbidden = requests.filter((r) => r.code === 403);
    expect(
      forbidden.filter((r) => r.namespace === undefined || r.namespace === ns || r.namespace === work),
    ).toEqual([]);
    const deniedByRbac: RequestInfo[] = [];
    for (const r of forbidden) if (!(await isAllowed(who, r))) deniedByRbac.push(r);
    expect(deniedByRbac).toEqual([]);
    console.log(`operator-rbac: requests by verb and resource ${JSON.stringify(seen)}`);
    console.log(
      `operator-rbac: ${requests.length} requests, ${forbidden.length} forbidden by admission in other tests' namespaces, 0 denied by RBAC`,
    );
  });

  it('operator.watchNamespaces: Roles there only; a paid call reads its Secret; nothing outside is seen', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rbacn');
    const work = await createTestNamespace(kubeconfig, 'op-ns-work');
    const outside = await createTestNamespace(kubeconfig, 'op-ns-out');
    const { userKubeconfig, release } = await chartIdentity(
      ns,
      { 'operator.watchNamespaces': `{${work}}`, 'operator.paidCalls.allowed': 'true' },
      ['Role', 'Role', 'Role', 'RoleBinding', 'RoleBinding', 'RoleBinding', 'ServiceAccount'],
    );
    // The gateway's keys Secret, as the chart makes it (empty) in the release namespace, which
    // the operator does not watch: it may patch that one Secret there and nothing else.
    const kept = `${release}-cacheroute-gateway-keys`;
    await kubectlOk(['create', 'secret', 'generic', kept, '-n', ns], { kubeconfig });

    // Rights in the watched namespace (Secrets included) and none elsewhere.
    const canI = async (...args: string[]): Promise<boolean> =>
      (await kubectl(['auth', 'can-i', ...args], { kubeconfig: userKubeconfig })).code === 0;
    expect(await canI('list', 'pods', '-n', work)).toBe(true);
    expect(await canI('get', 'secrets', '-n', work)).toBe(true);
    expect(await canI('update', `configmaps/${LEDGER_CONFIGMAP}`, '-n', work)).toBe(true);
    expect(await canI('list', 'secrets', '-n', work)).toBe(true);
    expect(await canI('patch', `secrets/${kept}`, '-n', ns)).toBe(true);
    expect(await canI('patch', 'secrets/other', '-n', ns)).toBe(false);
    expect(await canI('create', 'secrets', '-n', ns)).toBe(false);
    for (const elsewhere of [outside, ns, 'default']) {
      expect(await canI('get', 'secrets', '-n', elsewhere), `get secrets -n ${elsewhere}`).toBe(false);
      expect(await canI('list', 'pods', '-n', elsewhere), `list pods -n ${elsewhere}`).toBe(false);
    }
    expect(await canI('list', 'pods', '--all-namespaces')).toBe(false);
    expect(await canI('list', 'deployments.cacheroute.dev', '--all-namespaces')).toBe(false);

    await applyIn(work, buildDeploymentManifest({ name: 'llama-8b', replicas: 1 }));
    await applyIn(work, buildCachePolicyManifest('team-a', ['llama-8b']));
    await applyIn(outside, buildDeploymentManifest({ name: 'stray', replicas: 1 }));
    await applyIn(work, buildSecretManifest('openrouter', { 'api-key': FIXTURE_API_KEY }));
    await applyIn(
      work,
      buildOpenRouterTaskManifest({
        name: 'paid',
        prompt: 'Say hello.',
        secret: { name: 'openrouter', key: 'api-key' },
        cacheWriteUsage: 'required',
      }),
    );
    const fx = await startOpenRouterFixture();
    onTestFinished(() => fx.close());
    const cap = parseDailyCap('1 USD');
    if (!cap.ok) throw new Error(cap.error);

    const counter = createRequestCounter();
    countNextClient(counter);
    const op = await startOperator({
      kubeconfig: userKubeconfig,
      namespaces: [work],
      logger: createLogger({ level: 'error', fields: { component: 'operator' } }),
      leaderElection: { namespace: ns, name: 'cacheroute-operator' },
      http: false,
      openrouterBaseUrl: fx.baseUrl,
      dailyCap: cap.value,
      gatewayKeysSecret: { namespace: ns, name: kept },
    });
    let stopped = false;
    onTestFinished(async () => {
      if (!stopped) await op.stop();
    });

    // The watched namespace is reconciled.
    await eventually(() => getJson(['get', 'deployment.apps', 'llama-8b-sglang', '-n', work]));
    await eventually(async () => {
      const d = await getJson<{ status?: { observedGeneration?: number } }>([
        'get',
        'sgd',
        'llama-8b',
        '-n',
        work,
      ]);
      expect(d.status?.observedGeneration).toBe(1);
    });
    // The paid call: the generation Lease, the Secret, the ledger, all in the Task's namespace.
    await eventually(async () => {
      const t = await getJson<TaskView>(['get', 'tasks.cacheroute.dev', 'paid', '-n', work]);
      expect(t.status?.phase).toBe('Succeeded');
    });
    expect(fx.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${FIXTURE_API_KEY}`]);
    const ledger = await getJson<{ data?: Record<string, string> }>([
      'get',
      'configmap',
      LEDGER_CONFIGMAP,
      '-n',
      work,
    ]);
    expect(Object.keys(ledger.data ?? {})).not.toEqual([]);
    // The gateway's keys Secret carries the watched namespace's runtime keys.
    await eventually(async () => {
      const k = await getJson<{ data?: Record<string, string> }>(['get', 'secret', kept, '-n', ns]);
      const runtime = Buffer.from(k.data?.['runtime-keys.json'] ?? '', 'base64').toString('utf8');
      expect(Object.keys(JSON.parse(runtime || '{}') as object)).toEqual([`${work}/llama-8b`]);
    });
    await op.manager.events.flush();
    expect(op.manager.isLeader()).toBe(true);

    // The namespace outside the list: never read, never written.
    const stray = await getJson<{ status?: unknown }>(['get', 'sgd', 'stray', '-n', outside]);
    expect(stray.status).toBeUndefined();
    const strayWorkloads = await getJson<{ items: unknown[] }>(['get', 'deployments.apps', '-n', outside]);
    expect(strayWorkloads.items).toEqual([]);

    stopped = true;
    await op.stop();
    const requests = counter.requests();
    const seen = counter.snapshot().byVerbResource;
    for (const used of [
      'list deployments.cacheroute.dev',
      'list pods',
      'apply deployments.apps',
      'get secrets',
      'create configmaps',
      'create leases.coordination.k8s.io',
      'update tasks.cacheroute.dev/status',
      'create events.events.k8s.io',
    ])
      expect(seen[used], used).toBeGreaterThan(0);
    // Every request named a namespace: the watched one, or the release namespace for the
    // leader Lease and the gateway's keys Secret (applied). Nothing cluster-wide, nothing
    // outside, and nothing refused.
    expect(
      requests.filter(
        (r) =>
          r.namespace !== work &&
          !(r.namespace === ns && r.resource.startsWith('leases')) &&
          !(r.namespace === ns && r.resource === 'secrets' && r.verb === 'apply'),
      ),
    ).toEqual([]);
    expect(requests.filter((r) => r.code === 401 || r.code === 403)).toEqual([]);
    console.log(`operator-rbac (namespaced): requests by verb and resource ${JSON.stringify(seen)}`);
  });

  it('picker mode, namespaced: a team namespace gets its pool and the picker mirror, nothing denied', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rbacp');
    const team = await createTestNamespace(kubeconfig, 'op-pick-team');
    await installGieCrds(kubeconfig);
    const { who, userKubeconfig, release } = await chartIdentity(
      ns,
      { 'operator.watchNamespaces': `{${team}}`, 'gateway.mode': 'picker' },
      [
        'Role',
        'Role',
        'Role',
        'Role',
        'RoleBinding',
        'RoleBinding',
        'RoleBinding',
        'RoleBinding',
        'ServiceAccount',
      ],
    );
    const picker = `${release}-cacheroute-picker`;
    // The chart's picker Service and the EndpointSlice its controller keeps (no kubelet here).
    await applyIn(ns, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: picker },
      spec: { ports: [{ name: 'grpc', port: 9002, targetPort: 'grpc', appProtocol: 'kubernetes.io/h2c' }] },
    });
    await applyIn(ns, {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: `${picker}-x`,
        labels: {
          'kubernetes.io/service-name': picker,
          'endpointslice.kubernetes.io/managed-by': 'test.cacheroute.dev',
        },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.2.0.7'], conditions: { ready: true } }],
      ports: [{ name: 'grpc', port: 9002, protocol: 'TCP' }],
    });
    const canI = async (...args: string[]): Promise<boolean> =>
      (await kubectl(['auth', 'can-i', ...args], { kubeconfig: userKubeconfig })).code === 0;
    // Reads the picker's endpoints in the release namespace only; writes mirrors only where it works.
    expect(await canI('watch', 'endpointslices.discovery.k8s.io', '-n', ns)).toBe(true);
    expect(await canI('create', 'endpointslices.discovery.k8s.io', '-n', ns)).toBe(false);
    expect(await canI('patch', 'services', '-n', ns)).toBe(false);
    expect(await canI('list', 'endpointslices.discovery.k8s.io', '-n', team)).toBe(false);
    expect(await canI('create', 'endpointslices.discovery.k8s.io', '-n', team)).toBe(true);
    expect(await canI('delete', 'endpointslices.discovery.k8s.io', '-n', team)).toBe(false);
    expect(await canI('list', 'endpointslices.discovery.k8s.io', '--all-namespaces')).toBe(false);

    await applyIn(team, buildDeploymentManifest({ name: 'llama-8b', replicas: 1 }));
    const counter = createRequestCounter();
    countNextClient(counter);
    const op = await startOperator({
      kubeconfig: userKubeconfig,
      namespaces: [team],
      logger: createLogger({ level: 'error', fields: { component: 'operator' } }),
      leaderElection: { namespace: ns, name: 'cacheroute-operator' },
      http: false,
      picker: { namespace: ns, name: picker, port: 9002 },
    });
    let stopped = false;
    onTestFinished(async () => {
      if (!stopped) await op.stop();
    });
    await eventually(() =>
      getJson(['get', 'inferencepools.inference.networking.k8s.io', 'llama-8b', '-n', team]),
    );
    await eventually(async () => {
      const slice = await getJson<{ endpoints?: { addresses: string[] }[] }>([
        'get',
        'endpointslices.discovery.k8s.io',
        `${picker}-mirror`,
        '-n',
        team,
      ]);
      expect(slice.endpoints?.map((e) => e.addresses[0])).toEqual(['10.2.0.7']);
    });
    stopped = true;
    await op.stop();
    const requests = counter.requests();
    const seen = counter.snapshot().byVerbResource;
    for (const used of [
      'list endpointslices.discovery.k8s.io',
      'apply endpointslices.discovery.k8s.io',
      'apply services',
      'apply inferencepools.inference.networking.k8s.io',
    ])
      expect(seen[used], used).toBeGreaterThan(0);
    const denied: RequestInfo[] = [];
    for (const r of requests.filter((x) => x.code === 401 || x.code === 403))
      if (!(await isAllowed(who, r))) denied.push(r);
    expect(denied).toEqual([]);
    expect(requests.filter((r) => r.code === 401 || r.code === 403)).toEqual([]);
  });
});
