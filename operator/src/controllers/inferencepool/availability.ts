// Whether the cluster serves InferencePools (GIE's CRD installed). The operator keeps no informer
// on them: one on a resource the API server does not serve never syncs, and every controller
// waits for its informers (as for LeaderWorkerSets, deployment/multi-node/availability.ts).
import { isNotFound, type KubeClient } from '#kube/client.ts';
import { Resources } from '#kube/resources.ts';

export const INFERENCE_POOL_MISSING = 'InferencePoolCrdMissing';
export const INFERENCE_POOL_MISSING_MESSAGE =
  'the operator runs with the endpoint picker (--inference-pool-picker-service) but this cluster does not ' +
  'serve InferencePools (inference.networking.k8s.io/v1): install the Gateway API Inference Extension CRDs ' +
  '(helm upgrade --set inferencePool.installCRDs=true, or GIE v1.6.2 config/crd), or run the chart with ' +
  'gateway.mode standalone; no InferencePool is kept until then';

/** A seen answer stands this long; a missing API is asked again at every pass. */
const AVAILABLE_FOR_MS = 5 * 60_000;

export class InferencePoolApi {
  private availableUntil = 0;
  private readonly probe: (namespace: string) => Promise<boolean>;
  private readonly now: () => number;

  constructor(probe: (namespace: string) => Promise<boolean>, now: () => number = Date.now) {
    this.probe = probe;
    this.now = now;
  }

  static forClient(client: KubeClient): InferencePoolApi {
    // In the Deployment's namespace: a namespaced install may list nothing cluster-wide.
    return new InferencePoolApi(async (namespace) => {
      try {
        await client.list(Resources.inferencePools, { namespace, limit: 1 });
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    });
  }

  async available(namespace: string): Promise<boolean> {
    if (this.now() < this.availableUntil) return true;
    const yes = await this.probe(namespace);
    this.availableUntil = yes ? this.now() + AVAILABLE_FOR_MS : 0;
    return yes;
  }

  /** An apply found the API gone (the CRD removed): ask again next time. */
  forget(): void {
    this.availableUntil = 0;
  }
}
