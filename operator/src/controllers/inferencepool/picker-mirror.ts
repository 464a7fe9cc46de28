// The chart's picker Service, mirrored into a namespace of Deployments (ADR 0047). An
// InferencePool's endpointPickerRef names a Service of the pool's own namespace (GIE v1.6.2: a
// local object reference), and a pool must live beside its pods, so a Deployment in a team
// namespace needs a picker Service there: a Service of the picker's name and ports without a
// selector, and an EndpointSlice the operator copies from the picker Service's own (the picker
// pods' addresses and readiness). To a gateway and to kube-proxy it is an ordinary ClusterIP
// Service with endpoints: Istio, kgateway/agentgateway and NGINX Gateway Fabric resolve it as
// they resolve the picker in the release namespace (an ExternalName Service has no endpoints,
// which gateways that read EndpointSlices cannot use). The Service is owned by every Deployment
// of its namespace (no controller), so the garbage collector deletes it with the last one, and
// the EndpointSlice by the Service.
import { z } from 'zod';
import { API_VERSION, type DeploymentResource } from '#api';
import type { KubeObject, OwnerReference } from '#kube/objects.ts';
import { MANAGED_BY } from '../deployment/meta/labels.ts';

/** On the mirrored Service and EndpointSlice: which picker Service they copy (`namespace/name`). */
export const MIRROR_OF_ANNOTATION = 'cacheroute.dev/picker-mirror-of';
/** EndpointSlices not the EndpointSlice controller's (it would delete them otherwise). */
const SLICE_MANAGER = MANAGED_BY;

const ServicePort = z.object({
  name: z.string().optional(),
  port: z.number().int(),
  protocol: z.string().optional(),
  appProtocol: z.string().optional(),
  targetPort: z.union([z.number().int(), z.string()]).optional(),
});
const PickerServiceSpec = z.object({ spec: z.object({ ports: z.array(ServicePort).min(1) }) });

const Endpoint = z.object({
  addresses: z.array(z.string()).min(1),
  conditions: z
    .object({
      ready: z.boolean().optional(),
      serving: z.boolean().optional(),
      terminating: z.boolean().optional(),
    })
    .optional(),
  nodeName: z.string().optional(),
  zone: z.string().optional(),
});
const Slice = z.object({
  addressType: z.string(),
  endpoints: z.array(Endpoint).nullish(),
  ports: z
    .array(z.object({ name: z.string().optional(), port: z.number().int().optional() }).passthrough())
    .nullish(),
});

export interface MirrorSource {
  readonly namespace: string;
  readonly name: string;
  /** The picker Service, as the API server has it (its ports). */
  readonly service: KubeObject;
  /** Its EndpointSlices (label kubernetes.io/service-name). */
  readonly slices: readonly KubeObject[];
}

export interface PickerMirror {
  readonly service: KubeObject;
  /** Built once the mirrored Service's uid is known (the slice's owner). */
  slice(serviceUid: string): KubeObject;
}

function labels(): Record<string, string> {
  return { 'app.kubernetes.io/part-of': 'cacheroute', 'app.kubernetes.io/managed-by': MANAGED_BY };
}

/** Every Deployment of the namespace owns the mirror; none controls it. */
function owners(deployments: readonly DeploymentResource[]): OwnerReference[] {
  return [...deployments]
    .sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''))
    .map((d) => ({
      apiVersion: API_VERSION,
      kind: 'Deployment',
      name: d.metadata.name ?? '',
      uid: d.metadata.uid ?? '',
    }));
}

/**
 * The mirror of `source` in `namespace`, owned by `deployments`; undefined while the picker
 * Service has no ports to copy (not created yet).
 */
export function buildPickerMirror(
  source: MirrorSource,
  namespace: string,
  deployments: readonly DeploymentResource[],
): PickerMirror | undefined {
  const parsed = PickerServiceSpec.safeParse(source.service);
  if (!parsed.success) return undefined;
  const ports = parsed.data.spec.ports;
  const slices = source.slices.flatMap((s) => {
    const r = Slice.safeParse(s);
    return r.success ? [r.data] : [];
  });
  // The picker pods' port numbers, by port name (a named targetPort resolves per pod).
  const podPort = new Map<string, number>();
  for (const s of slices)
    for (const p of s.ports ?? [])
      if (p.name !== undefined && p.port !== undefined) podPort.set(p.name, p.port);
  const annotations = { [MIRROR_OF_ANNOTATION]: `${source.namespace}/${source.name}` };
  const service: KubeObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: source.name,
      namespace,
      labels: labels(),
      annotations,
      ownerReferences: owners(deployments),
    },
    spec: {
      type: 'ClusterIP',
      // No selector: the endpoints are the EndpointSlice below.
      ports: ports.map((p) => ({
        ...(p.name !== undefined ? { name: p.name } : {}),
        port: p.port,
        protocol: p.protocol ?? 'TCP',
        ...(p.appProtocol !== undefined ? { appProtocol: p.appProtocol } : {}),
      })),
    },
  };
  const slicePorts = ports.map((p) => ({
    ...(p.name !== undefined ? { name: p.name } : {}),
    port: podPort.get(p.name ?? '') ?? (typeof p.targetPort === 'number' ? p.targetPort : p.port),
    protocol: p.protocol ?? 'TCP',
    ...(p.appProtocol !== undefined ? { appProtocol: p.appProtocol } : {}),
  }));
  const addressType = slices[0]?.addressType ?? 'IPv4';
  const seen = new Set<string>();
  const endpoints = slices
    .filter((s) => s.addressType === addressType)
    .flatMap((s) => s.endpoints ?? [])
    .filter((e) => {
      const key = e.addresses.join(',');
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .sort((a, b) => (a.addresses[0] ?? '').localeCompare(b.addresses[0] ?? ''));
  return {
    service,
    slice: (serviceUid) => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: `${source.name}-mirror`,
        namespace,
        labels: {
          ...labels(),
          'kubernetes.io/service-name': source.name,
          'endpointslice.kubernetes.io/managed-by': SLICE_MANAGER,
        },
        annotations,
        ownerReferences: [
          {
            apiVersion: 'v1',
            kind: 'Service',
            name: source.name,
            uid: serviceUid,
            // No blockOwnerDeletion: it would need update on services/finalizers.
            controller: true,
          },
        ],
      },
      addressType,
      endpoints,
      ports: slicePorts,
    }),
  };
}

/** Whether a live Service of the picker's name is this operator's mirror (else: not ours to change). */
export function isPickerMirror(live: KubeObject): boolean {
  return live.metadata?.annotations?.[MIRROR_OF_ANNOTATION] !== undefined;
}
