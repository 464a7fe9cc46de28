// The shapes of the NetworkPolicies the operator keeps and of the pods they admit: shared by
// the runtime's policy (network-policy.ts) and the L3 store's (l3/mooncake.ts).
import type { V1NetworkPolicyPeer, V1NetworkPolicyPort, V1ObjectMeta } from '@kubernetes/client-node';

/** Pods of one namespace with these labels (all of its pods when there are none). */
export interface PodPeer {
  readonly namespace: string;
  readonly podLabels: Readonly<Record<string, string>>;
}

/**
 * The wire shape: client-node's V1NetworkPolicyIngressRule spells `from` as `_from` (its
 * serializer renames it), and the operator sends plain JSON.
 */
export interface NetworkPolicyObject {
  apiVersion: 'networking.k8s.io/v1';
  kind: 'NetworkPolicy';
  metadata: V1ObjectMeta;
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: ['Ingress'];
    ingress: { from: V1NetworkPolicyPeer[]; ports?: V1NetworkPolicyPort[] }[];
  };
}
