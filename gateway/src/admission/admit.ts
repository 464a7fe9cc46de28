// One request through its Deployment's admission: this replica's share of the
// CachePolicy's tier-wide bounds, the wait traced and measured, a refusal
// counted and turned into the client's error (rejection.ts).

import type { TierPosition } from '../fleet/tier-position.ts';
import type { GatewayMetrics } from '../metrics/index.ts';
import type { ModelRoute } from '../routing/table.ts';
import type { PickTrace } from '../tracing/pick-trace.ts';
import type { AdmissionRegistry, Permit } from './controller.ts';
import { toGatewayError } from './rejection.ts';

export interface Admitting {
  readonly signal: AbortSignal;
  readonly priority: number;
  /** What the runtime serves for the request: prompts x n (controller.ts counts it). */
  readonly weight: number;
  readonly trace?: PickTrace | undefined;
}

export async function admitRequest(
  registry: AdmissionRegistry,
  tier: TierPosition,
  metrics: GatewayMetrics,
  route: ModelRoute,
  { signal, priority, weight, trace }: Admitting,
): Promise<Permit> {
  const { deployment, admission } = route;
  const ctl = registry.get(deployment, {
    maxConcurrency: tier.shareOf(admission.maxConcurrency),
    maxQueue: tier.shareOf(admission.maxQueue),
    queueTimeoutMs: admission.queueTimeoutSeconds * 1000,
    adaptive: admission.adaptive,
  });
  const span = trace?.startAdmission(deployment, priority);
  const r = await ctl.acquire(signal, { priority, weight });
  if (r.ok) {
    registry.countAdmission(deployment);
    span?.admitted(r.value.queuedMs);
    metrics.queueSeconds.observe({ deployment }, r.value.queuedMs / 1000);
    return r.value;
  }
  span?.rejected(r.error.code);
  metrics.admissionRejections.inc({ deployment, reason: r.error.code });
  if (r.error.code === 'overloaded' || r.error.code === 'queue-timeout') registry.countRefusal(deployment);
  throw toGatewayError(r.error, deployment, admission.queueTimeoutSeconds * 1000);
}
