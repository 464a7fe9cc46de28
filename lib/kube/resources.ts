// Resource types the runtime reads and writes: group, version, plural and scope are all
// a REST path needs. Our CRDs sit beside the core types so every shell uses one table.
import { GROUP, VERSION } from '#api/resources.ts';

export interface ResourceType {
  group: string; // '' for the core group
  version: string;
  resource: string; // plural, as in the URL
  kind: string;
  namespaced: boolean;
}

function core(resource: string, kind: string, namespaced = true): ResourceType {
  return { group: '', version: 'v1', resource, kind, namespaced };
}

export const Resources = {
  pods: core('pods', 'Pod'),
  services: core('services', 'Service'),
  configMaps: core('configmaps', 'ConfigMap'),
  secrets: core('secrets', 'Secret'),
  persistentVolumeClaims: core('persistentvolumeclaims', 'PersistentVolumeClaim'),
  namespaces: core('namespaces', 'Namespace', false),
  nodes: core('nodes', 'Node', false),
  coreEvents: core('events', 'Event'),
  deployments: {
    group: 'apps',
    version: 'v1',
    resource: 'deployments',
    kind: 'Deployment',
    namespaced: true,
  },
  replicaSets: {
    group: 'apps',
    version: 'v1',
    resource: 'replicasets',
    kind: 'ReplicaSet',
    namespaced: true,
  },
  statefulSets: {
    group: 'apps',
    version: 'v1',
    resource: 'statefulsets',
    kind: 'StatefulSet',
    namespaced: true,
  },
  jobs: { group: 'batch', version: 'v1', resource: 'jobs', kind: 'Job', namespaced: true },
  // sigs.k8s.io/lws: multi-node replicas (controllers/deployment/multi-node).
  leaderWorkerSets: {
    group: 'leaderworkerset.x-k8s.io',
    version: 'v1',
    resource: 'leaderworkersets',
    kind: 'LeaderWorkerSet',
    namespaced: true,
  },
  // Gateway API Inference Extension (v1.6.2): a Deployment's pool for GIE gateways (controllers/inferencepool).
  inferencePools: {
    group: 'inference.networking.k8s.io',
    version: 'v1',
    resource: 'inferencepools',
    kind: 'InferencePool',
    namespaced: true,
  },
  events: { group: 'events.k8s.io', version: 'v1', resource: 'events', kind: 'Event', namespaced: true },
  endpointSlices: {
    group: 'discovery.k8s.io',
    version: 'v1',
    resource: 'endpointslices',
    kind: 'EndpointSlice',
    namespaced: true,
  },
  networkPolicies: {
    group: 'networking.k8s.io',
    version: 'v1',
    resource: 'networkpolicies',
    kind: 'NetworkPolicy',
    namespaced: true,
  },
  subjectAccessReviews: {
    group: 'authorization.k8s.io',
    version: 'v1',
    resource: 'subjectaccessreviews',
    kind: 'SubjectAccessReview',
    namespaced: false,
  },
  leases: {
    group: 'coordination.k8s.io',
    version: 'v1',
    resource: 'leases',
    kind: 'Lease',
    namespaced: true,
  },
  sglangDeployments: {
    group: GROUP,
    version: VERSION,
    resource: 'deployments',
    kind: 'Deployment',
    namespaced: true,
  },
  deploymentParts: {
    group: GROUP,
    version: VERSION,
    resource: 'deploymentparts',
    kind: 'DeploymentPart',
    namespaced: true,
  },
  cachePolicies: {
    group: GROUP,
    version: VERSION,
    resource: 'cachepolicies',
    kind: 'CachePolicy',
    namespaced: true,
  },
  tasks: { group: GROUP, version: VERSION, resource: 'tasks', kind: 'Task', namespaced: true },
  tenants: { group: GROUP, version: VERSION, resource: 'tenants', kind: 'Tenant', namespaced: true },
  qualifications: {
    group: GROUP,
    version: VERSION,
    resource: 'qualifications',
    kind: 'Qualification',
    namespaced: true,
  },
} as const satisfies Record<string, ResourceType>;

export function apiVersionOf(rt: ResourceType): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

// `deployments.apps`, `pods`: the name kubectl and RBAC use; also our metric label.
export function resourceLabel(rt: ResourceType): string {
  return rt.group ? `${rt.resource}.${rt.group}` : rt.resource;
}

export function resourcePath(
  rt: ResourceType,
  where: { namespace?: string | undefined; name?: string | undefined; subresource?: string | undefined } = {},
): string {
  let path = rt.group ? `/apis/${rt.group}/${rt.version}` : `/api/${rt.version}`;
  if (rt.namespaced && where.namespace) path += `/namespaces/${encodeURIComponent(where.namespace)}`;
  path += `/${rt.resource}`;
  if (where.name !== undefined) path += `/${encodeURIComponent(where.name)}`;
  if (where.subresource !== undefined) path += `/${where.subresource}`;
  return path;
}

// Whether an ownerReference (apiVersion + kind) points at this resource type.
export function refersTo(ref: { apiVersion: string; kind: string }, rt: ResourceType): boolean {
  return ref.kind === rt.kind && ref.apiVersion === apiVersionOf(rt);
}
