// A Deployment's InferencePool (Gateway API Inference Extension v1): what a GIE gateway (Istio,
// agentgateway, NGINX Gateway Fabric, Envoy AI Gateway) routes an HTTPRoute to, asking the pool's
// endpoint picker (cacheroute's, the chart's picker Service) which pod serves each request. One
// per Deployment (ADR 0026): a pool's selector is matchLabels only, and the one label set that
// picks out exactly one Deployment's serving SGLang pods is its own.
import type { PickerFailureMode } from '#api';
import type { DeploymentResource } from '#api';
import type { KubeObject } from '#kube/objects.ts';
import { SGLANG_PORT } from '../deployment/args.ts';
import { LABEL_DEPLOYMENT, MANAGED_BY } from '../deployment/meta/labels.ts';
import { buildOwnedMetadata } from '../deployment/meta/owned.ts';
import { buildLeaderSelector } from '../deployment/multi-node/leader-worker-set.ts';

export const INFERENCE_POOL_API_VERSION = 'inference.networking.k8s.io/v1';

/** The chart's picker Service the pools name (--inference-pool-picker-*). */
export interface PickerService {
  readonly namespace: string;
  readonly name: string;
  /** Its ext_proc gRPC port. */
  readonly port: number;
}

export interface InferencePoolObject extends KubeObject {
  spec: {
    selector: { matchLabels: Record<string, string> };
    targetPorts: { number: number }[];
    appProtocol: 'http';
    endpointPickerRef: {
      group: '';
      kind: 'Service';
      name: string;
      port: { number: number };
      failureMode: PickerFailureMode;
    };
  };
}

/** The pool's name: the Deployment's, so an HTTPRoute names the model's pool as the model's Deployment. */
export function buildInferencePoolName(root: DeploymentResource): string {
  return root.metadata.name ?? '';
}

/**
 * The labels that select exactly the Deployment's serving SGLang pods: its own label (on its pods
 * only: prefill and decode alike, never a fetch or verify Job's), and across nodes the groups'
 * leaders only (workers serve no HTTP). Prefill and decode pods are both in: the picker chooses
 * among them, as llm-d's does.
 */
export function buildPoolSelector(root: DeploymentResource): Record<string, string> {
  return { [LABEL_DEPLOYMENT]: root.metadata.name ?? '', ...buildLeaderSelector(root.spec) };
}

export function buildInferencePool(
  root: DeploymentResource,
  picker: PickerService,
  failureMode: PickerFailureMode,
): InferencePoolObject {
  const name = root.metadata.name ?? '';
  return {
    apiVersion: INFERENCE_POOL_API_VERSION,
    kind: 'InferencePool',
    metadata: buildOwnedMetadata(root, buildInferencePoolName(root), {
      'app.kubernetes.io/part-of': 'cacheroute',
      'app.kubernetes.io/managed-by': MANAGED_BY,
      [LABEL_DEPLOYMENT]: name,
    }),
    spec: {
      selector: { matchLabels: buildPoolSelector(root) },
      // SGLang's HTTP port on every pod (a prefill pod's bootstrap port is not a request endpoint).
      targetPorts: [{ number: SGLANG_PORT }],
      appProtocol: 'http',
      endpointPickerRef: {
        group: '',
        kind: 'Service',
        name: picker.name,
        port: { number: picker.port },
        failureMode,
      },
    },
  };
}
