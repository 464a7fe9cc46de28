// Who may reach a Deployment's SGLang pods: one NetworkPolicy per cacheroute
// Deployment, over all its pods (every role), admitting
// - its own pods, on every port: prefill/decode KV transfer and bootstrap,
//   and ranks of one engine talk on ports SGLang picks at run time;
// - the gateway's pods: the HTTP port and the event publishers (KV events,
//   their replay, load), which it subscribes to;
// - the operator's pods: the HTTP port (verification, warm-up, Tasks);
// - Prometheus, when given: the HTTP port, where SGLang serves /metrics.
// Nothing else: a caller inside the cluster that is none of these is refused
// by the network, and by SGLang's --api-key if the network lets it through.
// Peers come from the operator's flags (the chart passes its own gateway's
// and operator's namespace and pod labels); egress is not restricted.
import type { V1NetworkPolicyPeer, V1NetworkPolicyPort } from '@kubernetes/client-node';
import type { DeploymentResource } from '#api';
import { computeEventPorts, SGLANG_PORT } from './args.ts';
import { buildOwnedMetadata } from './meta/owned.ts';
import { LABEL_DEPLOYMENT, MANAGED_BY } from './meta/labels.ts';
import type { NetworkPolicyObject, PodPeer } from './meta/network-policy-object.ts';

export type { NetworkPolicyObject, PodPeer };

/** The peers a runtime admits besides its own pods; `metrics` only when something scrapes them. */
export interface RuntimeIngress {
  readonly gateway: PodPeer;
  readonly operator: PodPeer;
  readonly metrics?: PodPeer | undefined;
}

/** Set on every namespace by the API server (1.21+): how a policy names one namespace. */
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

export function buildRuntimeNetworkPolicyName(deployment: string): string {
  return `${deployment}-runtime-ingress`;
}

function toPeer(p: PodPeer): V1NetworkPolicyPeer {
  return {
    namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: p.namespace } },
    podSelector: { matchLabels: { ...p.podLabels } },
  };
}

const HTTP_PORT: V1NetworkPolicyPort = { protocol: 'TCP', port: SGLANG_PORT };

/** The HTTP port, and the event publishers' ports when the runtime publishes (one range). */
function buildGatewayPorts(root: DeploymentResource): V1NetworkPolicyPort[] {
  const events = computeEventPorts(root.spec);
  if (!events) return [HTTP_PORT];
  const ranks = root.spec.parallelism.data;
  // KV, replay and load ranges are contiguous (args.ts computeEventPorts): one range covers them.
  const last = (events.load ?? events.replay) + ranks - 1;
  return [HTTP_PORT, { protocol: 'TCP', port: events.kv, endPort: last }];
}

export function buildRuntimeNetworkPolicy(
  root: DeploymentResource,
  ingress: RuntimeIngress,
): NetworkPolicyObject {
  const name = root.metadata.name ?? '';
  const ownPods = { [LABEL_DEPLOYMENT]: name };
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: buildOwnedMetadata(root, buildRuntimeNetworkPolicyName(name), {
      [LABEL_DEPLOYMENT]: name,
      'app.kubernetes.io/managed-by': MANAGED_BY,
    }),
    spec: {
      podSelector: { matchLabels: ownPods },
      policyTypes: ['Ingress'],
      ingress: [
        { from: [{ podSelector: { matchLabels: ownPods } }] },
        { from: [toPeer(ingress.gateway)], ports: buildGatewayPorts(root) },
        { from: [toPeer(ingress.operator)], ports: [HTTP_PORT] },
        ...(ingress.metrics ? [{ from: [toPeer(ingress.metrics)], ports: [HTTP_PORT] }] : []),
      ],
    },
  };
}
