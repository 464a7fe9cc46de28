// The Gateway API Inference Extension's CRDs (InferencePool v1, pinned by hack/gie-crds.sh) on a
// test control plane, as `helm install --set inferencePool.installCRDs=true` puts them on a
// cluster: the operator keeps an InferencePool per Deployment only where they are served.
import { join } from 'node:path';
import { kubectlOk } from './kubectl.ts';
import { REPO_ROOT } from './samples.ts';

export const GIE_CRDS_DIR = join(REPO_ROOT, 'charts', 'cacheroute', 'gie-crds');
export const INFERENCE_POOL_CRD = 'inferencepools.inference.networking.k8s.io';

/** Applies the pinned GIE CRDs and waits until the API server serves them. */
export async function installGieCrds(kubeconfig: string): Promise<void> {
  await kubectlOk(['apply', '--server-side', '-f', GIE_CRDS_DIR], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', GIE_CRDS_DIR], {
    kubeconfig,
  });
}
