// Whether the user the aggregator names may read a metric: a SubjectAccessReview,
// as every aggregated API server delegates authorization to the API server. The
// HPA controller's role (system:controller:horizontal-pod-autoscaler) grants
// list on external.metrics.k8s.io; the API server reads a namespaced path
// without a name as a list.
import type { KubeClient } from '#kube/client.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { METRICS_API_GROUP, METRICS_API_VERSION } from './catalogue.ts';
import type { ProxiedUser } from './front-proxy.ts';

export interface MetricAccess {
  readonly namespace: string;
  readonly metric: string;
}

export type Authorizer = (
  user: ProxiedUser,
  access: MetricAccess,
) => Promise<{ allowed: boolean; reason: string }>;

interface SubjectAccessReview extends KubeObject {
  spec?: unknown;
  status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
}

export function buildSubjectAccessReviewer(client: KubeClient): Authorizer {
  return async (user, access) => {
    const review = await client.create<SubjectAccessReview>(Resources.subjectAccessReviews, {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      metadata: {},
      spec: {
        user: user.name,
        groups: user.groups,
        resourceAttributes: {
          group: METRICS_API_GROUP,
          version: METRICS_API_VERSION,
          resource: access.metric,
          namespace: access.namespace,
          verb: 'list',
        },
      },
    });
    const status = review.status ?? {};
    return { allowed: status.allowed === true, reason: status.reason ?? status.evaluationError ?? '' };
  };
}
