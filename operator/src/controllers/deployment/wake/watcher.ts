// Watches the gateway tier for demand on sleeping Deployments: every period,
// while this operator leads and some Deployment wakes on demand at replicas 0,
// it reads every gateway replica's report and remembers when each such
// Deployment last had a request held, queued or in flight, then queues a
// reconcile of those whose wake plan (plan.ts) changed. The gateway never
// writes to the cluster: what it holds is a number in its report.
import type { DeploymentResource } from '../../../api/index.ts';
import type { Logger } from '../../../runtime/logger.ts';
import { formatKey, type ObjectKey } from '../../../runtime/objects.ts';
import { readGatewayTier } from '../cache-health/gateway-report.ts';
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

const sleeping = (d: DeploymentResource): boolean => d.spec.wakeOnDemand === true && d.spec.replicas === 0;

export class WakeWatcher {
  readonly #opts: WakeWatcherOptions;
  readonly #now: () => number;
  readonly #demand = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  #lastError: string | undefined;

  constructor(opts: WakeWatcherOptions) {
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
    opts.signal.addEventListener('abort', () => this.stop(), { once: true });
  }

  start(): void {
    if (this.#timer || this.#opts.signal.aborted) return;
    this.#timer = setInterval(() => void this.#tick(), this.#opts.periodMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** When the tier last wanted the Deployment (ms), as this operator saw it. */
  demandOf(key: ObjectKey): number | undefined {
    return this.#demand.get(formatKey(key));
  }

  async #tick(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      await this.poll();
    } finally {
      this.#busy = false;
    }
  }

  /** One read of the tier (the timer's; tests call it directly). */
  async poll(): Promise<void> {
    if (!this.#opts.isLeader()) return this.#demand.clear();
    const watched = this.#opts.deployments().filter(sleeping);
    if (watched.length === 0) return;
    const tier = await readGatewayTier(this.#opts.gatewayAdminUrl, {
      timeoutMs: 3_000,
      signal: this.#opts.signal,
    });
    const now = this.#now();
    if (!tier.ok) return this.#warn(tier.error);
    const wanted = new Set<string>();
    for (const r of tier.replicas) {
      if (!r.ok) continue;
      for (const d of r.report.deployments) {
        const busy = (d.waking ?? 0) + (d.admission?.queued ?? 0) + (d.admission?.inFlight ?? 0);
        if (busy > 0) wanted.add(d.deployment);
      }
    }
    this.#lastError = undefined;
    for (const d of watched) {
      const key = { namespace: d.metadata.namespace ?? '', name: d.metadata.name ?? '' };
      const id = formatKey(key);
      if (wanted.has(id)) this.#demand.set(id, now);
      const plan = planWake({
        spec: d.spec,
        status: d.status?.wake,
        demandMs: this.#demand.get(id),
        nowMs: now,
      });
      if (JSON.stringify(plan.status) !== JSON.stringify(d.status?.wake)) this.#opts.onChanged(key);
    }
  }

  #warn(error: string): void {
    if (error !== this.#lastError)
      this.#opts.logger.warn('gateway tier unread: sleeping Deployments cannot wake', { error });
    this.#lastError = error;
  }
}
