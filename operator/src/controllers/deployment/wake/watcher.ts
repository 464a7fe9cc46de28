// Watches the gateway tier for demand on sleeping Deployments: every period,
// while this operator leads and some Deployment wakes on demand at replicas 0
// (both parts at 0 for a prefill/decode pair),
// it reads every gateway replica's report and remembers when each such
// Deployment was last wanted, then queues a reconcile of those whose wake plan
// (plan.ts) changed. Wanted: a request held, queued or in flight at the read,
// or admitted since the last read (a replica's counter, so that a request
// shorter than the period is not missed). When the tier cannot be read, an
// awake Deployment counts as wanted: it is not put to sleep on a guess. The
// gateway never writes to the cluster: what it holds is a number in its report.
import { declaresSleep, type DeploymentResource, type GatewayCacheReport } from '#api';
import { deepEqual } from '../../../manager/equal.ts';
import type { Logger } from '#kube/logger.ts';
import { formatKey, type ObjectKey } from '#kube/objects.ts';
import { LeaderPeriodicWorker } from '../../../manager/periodic.ts';
import { readGatewayTier } from '../../../gateway-client/tier.ts';
import { planWake } from './plan.ts';

export interface WakeWatcherOptions {
  readonly deployments: () => readonly DeploymentResource[];
  readonly isLeader: () => boolean;
  readonly onChanged: (key: ObjectKey) => void;
  readonly gatewayAdminUrl: string;
  readonly periodMs: number;
  readonly logger: Logger;
  readonly signal: AbortSignal;
  readonly now?: () => number;
}

const sleeping = (d: DeploymentResource): boolean => declaresSleep(d.spec);

/**
 * Pure: the Deployments (namespace/name) the reports show wanted, and each replica start's
 * admissions per Deployment to compare the next read with (`seen`: this read's, from the last).
 */
export function findWanted(
  reports: readonly GatewayCacheReport[],
  seen: ReadonlyMap<string, number>,
): { wanted: Set<string>; seen: Map<string, number> } {
  const wanted = new Set<string>();
  const next = new Map<string, number>();
  for (const r of reports)
    for (const d of r.deployments) {
      const busy = (d.waking ?? 0) + (d.admission?.queued ?? 0) + (d.admission?.inFlight ?? 0);
      // Keyed by the replica's start: a restarted replica's counter begins again.
      const counter = `${r.instance}/${d.deployment}`;
      const admitted = d.admission?.admitted;
      const before = seen.get(counter);
      if (admitted !== undefined) next.set(counter, admitted);
      if (busy > 0 || (admitted !== undefined && before !== undefined && admitted > before))
        wanted.add(d.deployment);
    }
  return { wanted, seen: next };
}

export class WakeWatcher extends LeaderPeriodicWorker {
  readonly #opts: WakeWatcherOptions;
  readonly #now: () => number;
  readonly #demand = new Map<string, number>();
  /** Each replica start's admissions per Deployment, at the last read. */
  #admitted = new Map<string, number>();
  /** The plan last queued per Deployment: queued once, not every period, until status shows it. */
  readonly #queued = new Map<string, string>();
  #lastError: string | undefined;

  constructor(opts: WakeWatcherOptions) {
    super({ ...opts, what: 'wake pass' });
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  /** When the tier last wanted the Deployment (ms), as this operator saw it. */
  demandOf(key: ObjectKey): number | undefined {
    return this.#demand.get(formatKey(key));
  }

  protected override forget(): void {
    this.#demand.clear();
    this.#queued.clear();
  }

  /** One read of the tier. */
  protected override async lead(): Promise<void> {
    const watched = this.#opts.deployments().filter(sleeping);
    if (watched.length === 0) return;
    const tier = await readGatewayTier(this.#opts.gatewayAdminUrl, {
      timeoutMs: 3_000,
      signal: this.#opts.signal,
    });
    const now = this.#now();
    const reports = tier.ok ? tier.replicas.flatMap((r) => (r.ok ? [r.report] : [])) : [];
    const unread = tier.ok
      ? tier.replicas.flatMap((r) => (r.ok ? [] : [`${r.address}: ${r.error}`]))
      : [tier.error];
    this.#report(unread);
    const found = findWanted(reports, this.#admitted);
    this.#admitted = found.seen;
    const wanted = found.wanted;
    const live = new Set(
      watched.map((d) => formatKey({ namespace: d.metadata.namespace ?? '', name: d.metadata.name ?? '' })),
    );
    for (const id of this.#demand.keys()) if (!live.has(id)) this.#demand.delete(id);
    for (const d of watched) {
      const key = { namespace: d.metadata.namespace ?? '', name: d.metadata.name ?? '' };
      const id = formatKey(key);
      // Unsure (a replica unread): keep what is awake awake.
      if (wanted.has(id) || (unread.length > 0 && d.status?.wake?.awake === true)) this.#demand.set(id, now);
      const plan = planWake({
        spec: d.spec,
        status: d.status?.wake,
        demandMs: this.#demand.get(id),
        nowMs: now,
        watching: true,
      }).status;
      if (deepEqual(plan, d.status?.wake)) this.#queued.delete(id);
      else if (this.#queued.get(id) !== JSON.stringify(plan)) {
        this.#queued.set(id, JSON.stringify(plan));
        this.#opts.onChanged(key);
      }
    }
  }

  #report(unread: readonly string[]): void {
    const error = unread.join('; ') || undefined;
    if (error !== undefined && error !== this.#lastError)
      this.#opts.logger.warn('gateway replicas unread: awake Deployments are kept awake meanwhile', {
        error,
      });
    this.#lastError = error;
  }
}
