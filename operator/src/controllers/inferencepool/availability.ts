// Whether the cluster serves InferencePools (GIE's CRD installed): the operator says so with an
// Event instead of failing its applies (lib/kube/served-api.ts).
import type { KubeClient } from '#kube/client.ts';
import { Resources } from '#kube/resources.ts';
import { ServedApi } from '#kube/served-api.ts';

export const INFERENCE_POOL_MISSING = 'InferencePoolCrdMissing';
export const INFERENCE_POOL_MISSING_MESSAGE =
  'the operator runs with the endpoint picker (--inference-pool-picker-service) but this cluster does not ' +
  'serve InferencePools (inference.networking.k8s.io/v1): install the Gateway API Inference Extension CRDs ' +
  '(helm upgrade --set inferencePool.installCRDs=true, or GIE v1.6.2 config/crd), or run the chart with ' +
  'gateway.mode standalone; no InferencePool is kept until then';

/** Whether this cluster serves InferencePools (kept a while once seen; lib/kube/served-api.ts). */
export function inferencePoolApi(client: KubeClient): ServedApi {
  return ServedApi.forClient(client, Resources.inferencePools);
}
