// Pure: the gateway tier's reports (one per replica) → one series per
// Deployment part, the values an autoscaler reads. The tier's own figures
// (queued, in flight, predicted prefill) are summed over replicas, as each
// replica counts only its own requests; the runtimes' figures (their queue,
// their KV usage) are the same runtime read by every replica, so the largest
// reading stands for it.
import type { DeploymentResource, GatewayCacheReport, GatewayEndpointLoad } from '#api';
import { ExternalMetric, type Part } from './catalogue.ts';

export interface Series {
  readonly namespace: string;
  readonly deployment: string;
  readonly part: Part;
  readonly values: Readonly<Partial<Record<ExternalMetric, number>>>;
}

/** The parts a Deployment scales by, from its spec (endpoints or not: at zero it still has them). */
export function partsOf(d: DeploymentResource): Part[] {
  return d.spec.disaggregation ? ['prefill', 'decode'] : ['standalone'];
}

interface EndpointTotals {
  part: Part;
  inFlight: number;
  pendingPrefillTokens: number;
  /** Highest learned rate among replicas; undefined: none learned one. */
  rate: number | undefined;
  runtimeQueued: number | undefined;
  tokenUsage: number | undefined;
}

const maxOf = (a: number | undefined, b: number | null): number | undefined =>
  b === null ? a : a === undefined ? b : Math.max(a, b);

function addLoad(t: EndpointTotals, load: GatewayEndpointLoad): void {
  t.inFlight += load.inFlight;
  t.pendingPrefillTokens += load.pendingPrefillTokens;
  t.rate = maxOf(t.rate, load.prefillTokensPerSecond);
  t.runtimeQueued = maxOf(t.runtimeQueued, load.runtimeQueued);
  t.tokenUsage = maxOf(t.tokenUsage, load.tokenUsage);
}

const mean = (xs: readonly number[]): number | undefined =>
  xs.length === 0 ? undefined : xs.reduce((a, b) => a + b, 0) / xs.length;

/** Seconds of queued prefill at an endpoint; undefined when tokens wait at a rate not learned yet. */
function backlogSeconds(t: EndpointTotals): number | undefined {
  if (t.pendingPrefillTokens === 0) return 0;
  return t.rate === undefined ? undefined : t.pendingPrefillTokens / t.rate;
}

export interface TierInput {
  readonly reports: readonly GatewayCacheReport[];
  /** Refusals per second over the last two reads, by namespace/name (sampler.ts). */
  readonly rejectionsPerSecond: ReadonlyMap<string, number>;
}

interface DeploymentTotals {
  queued: number;
  endpoints: Map<string, EndpointTotals>;
  /** Every replica reported its load: a gateway from before the load was reported makes it unknown. */
  complete: boolean;
}

/** Every replica's figures, by namespace/name of the Deployment and by pod. */
function sumTier(reports: readonly GatewayCacheReport[]): Map<string, DeploymentTotals> {
  const byDeployment = new Map<string, DeploymentTotals>();
  for (const report of reports)
    for (const d of report.deployments) {
      const entry: DeploymentTotals = byDeployment.get(d.deployment) ?? {
        queued: 0,
        endpoints: new Map(),
        complete: true,
      };
      byDeployment.set(d.deployment, entry);
      if (!d.admission) entry.complete = false;
      entry.queued += d.admission?.queued ?? 0;
      for (const e of d.endpoints) {
        if (!e.load) {
          entry.complete = false;
          continue;
        }
        const t: EndpointTotals = entry.endpoints.get(e.pod) ?? {
          part: e.role ?? 'standalone',
          inFlight: 0,
          pendingPrefillTokens: 0,
          rate: undefined,
          runtimeQueued: undefined,
          tokenUsage: undefined,
        };
        entry.endpoints.set(e.pod, t);
        addLoad(t, e.load);
      }
    }
  return byDeployment;
}

/** A part's values from the tier's totals of its endpoints. */
function valuesOf(
  part: Part,
  queued: number,
  endpoints: readonly EndpointTotals[],
): Partial<Record<ExternalMetric, number>> {
  const values: Partial<Record<ExternalMetric, number>> = {
    [ExternalMetric.queuedRequests]: queued,
    [ExternalMetric.inFlightRequests]: endpoints.reduce((a, t) => a + t.inFlight, 0),
  };
  // An endpoint with prompt tokens waiting at a rate not learned yet makes the mean unknown, not lower.
  const known = endpoints.map(backlogSeconds).filter((b): b is number => b !== undefined);
  const backlog = known.length < endpoints.length ? undefined : (mean(known) ?? 0);

  if (part !== 'decode' && backlog !== undefined) values[ExternalMetric.prefillBacklogSeconds] = backlog;
  const queues = endpoints.map((t) => t.runtimeQueued).filter((q) => q !== undefined);
  if (queues.length > 0) values[ExternalMetric.runtimeQueuedRequests] = queues.reduce((a, b) => a + b, 0);
  const usage = mean(endpoints.map((t) => t.tokenUsage).filter((u) => u !== undefined));
  if (usage !== undefined) values[ExternalMetric.runtimeKvUsage] = usage;
  return values;
}

export function computeSeries(deployments: readonly DeploymentResource[], tier: TierInput): Series[] {
  const totals = sumTier(tier.reports);
  return deployments.flatMap((d) => {
    const namespace = d.metadata.namespace ?? '';
    const name = d.metadata.name ?? '';
    const id = `${namespace}/${name}`;
    const seen = totals.get(id);
    const rejections = tier.rejectionsPerSecond.get(id);
    return partsOf(d).map((part): Series => {
      // Without a report of its load from every replica, the load is unknown, not zero.
      const values = seen?.complete
        ? valuesOf(
            part,
            seen.queued,
            [...seen.endpoints.values()].filter((t) => t.part === part),
          )
        : {};
      if (rejections !== undefined) values[ExternalMetric.rejectionsPerSecond] = rejections;
      return { namespace, deployment: name, part, values };
    });
  });
}
