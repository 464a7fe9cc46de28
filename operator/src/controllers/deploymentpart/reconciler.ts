// DeploymentParts (ADR 0015): their status from the pods of their part. The
// Deployment controller makes them and reads their replicas; this one only
// reports, so an HPA sees the part's pods and selector. Reads only informer
// caches; writes only status.
import { validateResource, type DeploymentPartResource } from '#api';
import type { KubeClient } from '#kube/client.ts';
import type { ControllerDefinition, Manager } from '../../manager/manager.ts';
import type { KubeObject, ObjectKey } from '#kube/objects.ts';
import { TerminalError, type ReconcileResult } from '../../manager/reconcile.ts';
import { Resources } from '#kube/resources.ts';
import { writeStatusIfChanged } from '../../manager/status.ts';
import type { PodObject } from '../deployment/meta/pod-view.ts';
import { LABEL_DEPLOYMENT, LABEL_ROLE } from '../deployment/meta/labels.ts';
import { buildDeploymentPartName, PartRole } from '#api';
import { computePartStatus } from './status.ts';

type PartObject = KubeObject & DeploymentPartResource;

export function buildDeploymentPartController(opts: {
  manager: Manager;
  client: KubeClient;
}): ControllerDefinition {
  const { manager, client } = opts;
  const parts = manager.informer<PartObject>(Resources.deploymentParts);
  // The Deployment controller's pod informer (same resource and selector): one cache.
  const pods = manager.informer<PodObject>(Resources.pods, LABEL_DEPLOYMENT);

  async function reconcile(key: ObjectKey): Promise<ReconcileResult> {
    const obj = parts.get(key.namespace, key.name);
    if (!obj || obj.metadata?.deletionTimestamp) return;
    const parsed = validateResource(obj);
    if (!parsed.ok || parsed.value.kind !== 'DeploymentPart') {
      const message = parsed.ok
        ? 'not a DeploymentPart'
        : parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
      manager.events.event(obj, 'Warning', 'InvalidSpec', message);
      throw new TerminalError(message);
    }
    const part = parsed.value;
    const ofDeployment = pods.list({
      namespace: key.namespace,
      labels: { [LABEL_DEPLOYMENT]: part.spec.deployment },
    });
    await writeStatusIfChanged(client, Resources.deploymentParts, obj, computePartStatus(part, ofDeployment));
    return undefined;
  }

  return {
    name: 'deploymentpart',
    primary: Resources.deploymentParts,
    watches: [
      {
        resource: Resources.pods,
        labelSelector: LABEL_DEPLOYMENT,
        map: (pod) => {
          const deployment = pod.metadata?.labels?.[LABEL_DEPLOYMENT];
          const role = PartRole.safeParse(pod.metadata?.labels?.[LABEL_ROLE]);
          return deployment && role.success
            ? [
                {
                  namespace: pod.metadata?.namespace ?? '',
                  name: buildDeploymentPartName(deployment, role.data),
                },
              ]
            : [];
        },
      },
    ],
    reconciler: { reconcile },
  };
}
