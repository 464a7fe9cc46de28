// Collects a StatusSnapshot from the running gateway: the routing table, the
// gateway's in-flight counts and admission controllers, the runtime load the
// poller scraped, the gateway's own metrics (routing decisions, predicted
// matches, reuse) and the answers the status plugin recorded. Reads only.

import type { TenantDirectory } from '../tenancy/tenant.ts';
import type { RuntimeLoad } from '../endpoints/book.ts';
import type { DownMark } from '../endpoints/standing.ts';
import type { GatewayMetrics, UpstreamFailureReason } from '../metrics/index.ts';
import type { RoutingTable } from '../routing/table.ts';
import type { ActivityRecorder, EndpointActivity, ErrorRecord } from './activity.ts';
import type { DecisionCounts, StatusSnapshot } from './view.ts';
import type { AdmissionSnapshot } from '../admission/index.ts';
import { computeSlowestLagMs, type EndpointKvStatus } from '../kv-index/fleet.ts';
import type { L3UnitStatus } from '../kv-index/shared-l3.ts';
import type { DiscoveryIssue } from '../discovery/build-table.ts';
import type { QualificationView } from '../discovery/qualification-view.ts';

/**
 * What /status reads of the running gateway (gateway.ts's Gateway), as a structural type:
 * status/ is mounted by the root's composition (app.ts) and does not import it back.
 */
export interface StatusGateway {
  inFlightOf(endpointId: string): number;
  readonly admission: {
    entries(): readonly (readonly [deployment: string, { snapshot(): AdmissionSnapshot }])[];
  };
  readonly standing: { list(): readonly Pick<DownMark, 'id' | 'reason'>[] };
  readonly kvIndex: { status(): readonly EndpointKvStatus[]; l3Status?(): readonly L3UnitStatus[] };
}

export interface SnapshotSources {
  readonly table: RoutingTable;
  readonly gateway: StatusGateway;
  readonly metrics: GatewayMetrics;
  readonly activity: ActivityRecorder;
  readonly runtimeLoad?: ((endpointId: string) => RuntimeLoad | undefined) | undefined;
  readonly tenants: TenantDirectory;
  /** What discovery left out of the table, and why; none with a static table. */
  readonly discoveryIssues?: (() => readonly DiscoveryIssue[]) | undefined;
  /** The Qualifications to plot (discovery's watcher); none with a static table. */
  readonly qualifications?: (() => readonly QualificationView[]) | undefined;
}

export async function collectStatusSnapshot(src: SnapshotSources, now: number): Promise<StatusSnapshot> {
  const routes = src.table.list();
  const inFlight = new Map<string, number>();
  const runtimeLoad = new Map<string, RuntimeLoad>();
  const activity = new Map<string, EndpointActivity>();
  const deploymentErrors = new Map<string, ErrorRecord>();
  for (const route of routes) {
    const err = src.activity.deploymentError(route.deployment);
    if (err) deploymentErrors.set(route.deployment, err);
    for (const e of route.endpoints) {
      inFlight.set(e.id, src.gateway.inFlightOf(e.id));
      const load = src.runtimeLoad?.(e.id);
      if (load) runtimeLoad.set(e.id, load);
      const a = src.activity.endpoint(e.id);
      if (a) activity.set(e.id, { ...a });
    }
  }
  const admission = new Map<string, AdmissionSnapshot>(
    src.gateway.admission.entries().map(([deployment, ctl]) => [deployment, ctl.snapshot()]),
  );

  const decisions = await collectDecisions(src.metrics);
  const routingTokens = await collectRoutingTokens(src.metrics);
  const failures: ReadonlyMap<string, Partial<Record<UpstreamFailureReason, number>>> = tabulate(
    await src.metrics.upstreamFailures.get(),
    'endpoint',
    'reason',
  );
  const reuse = tabulate(await src.metrics.reuse.get(), 'model', 'source');
  const down = new Map(src.gateway.standing.list().map((m) => [m.id, m.reason]));
  const kvIndex = new Map(
    src.gateway.kvIndex.status().map((k) => {
      const view = {
        usable: k.usable,
        reason: k.reason,
        blocks: k.ranks.reduce((n, r) => n + r.blocks, 0),
        lagMs: computeSlowestLagMs(k),
      };
      return [k.endpoint, view];
    }),
  );

  return {
    now,
    routes,
    admission,
    inFlight,
    runtimeLoad,
    decisions,
    activity,
    down,
    kvIndex,
    l3: src.gateway.kvIndex.l3Status?.() ?? [],
    failures,
    routingTokens,
    reuse,
    deploymentErrors,
    tenants: src.tenants,
    discoveryIssues: src.discoveryIssues?.() ?? [],
    qualifications: src.qualifications?.() ?? [],
  };
}

/** Routing decisions and predicted hits, per endpoint. */
async function collectDecisions(metrics: SnapshotSources['metrics']): Promise<Map<string, DecisionCounts>> {
  const decisions = new Map<string, DecisionCounts>();
  for (const { labels, value } of (await metrics.decisions.get()).values) {
    const id = String(labels.endpoint ?? '');
    const prev = decisions.get(id) ?? { routed: 0, predictedHits: 0 };
    decisions.set(id, {
      routed: prev.routed + value,
      predictedHits: prev.predictedHits + (labels.hit === 'true' ? value : 0),
    });
  }
  return decisions;
}

/** Prompt tokens routed and tokens predicted matched, per model. */
async function collectRoutingTokens(
  metrics: SnapshotSources['metrics'],
): Promise<Map<string, { prompt: number; matched: number }>> {
  const routingTokens = new Map<string, { prompt: number; matched: number }>();
  const tokensOf = (model: string) => routingTokens.get(model) ?? { prompt: 0, matched: 0 };
  for (const { labels, value } of (await metrics.promptTokens.get()).values) {
    const model = String(labels.model ?? '');
    routingTokens.set(model, { ...tokensOf(model), prompt: value });
  }
  for (const { labels, value } of (await metrics.matchedTokens.get()).values) {
    const model = String(labels.model ?? '');
    routingTokens.set(model, { ...tokensOf(model), matched: value });
  }
  return routingTokens;
}

/** A labelled metric as rows by one label, columns by another. */
function tabulate(
  metric: { readonly values: readonly { labels: Partial<Record<string, string | number>>; value: number }[] },
  row: string,
  column: string,
): Map<string, Record<string, number>> {
  const out = new Map<string, Record<string, number>>();
  for (const { labels, value } of metric.values) {
    const r = String(labels[row] ?? '');
    out.set(r, { ...out.get(r), [String(labels[column] ?? '')]: value });
  }
  return out;
}
