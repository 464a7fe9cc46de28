// Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics:
// - a candidate takes the lease when it is free (no holder: a clean release) or when
//   its record has not changed for leaseDuration as measured on the candidate's own
//   clock since it last saw it change (no trust in other machines' clocks);
// - the leader renews every retryPeriod and steps down when it could not renew for
//   renewDeadline (< leaseDuration, so it stops before anyone may take over);
// - stop({release: true}) clears the holder, so the next candidate takes over on its
//   next try instead of waiting out the lease.
// Writes carry the resourceVersion read, so two candidates never both win a race.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { KubeClient } from '#kube/client.ts';
import { isAlreadyExists, isConflict } from '#kube/client.ts';
import type { Clock } from '#kube/clock.ts';
import { sleep, systemClock } from '#kube/clock.ts';
import type { Logger } from '#kube/logger.ts';
import { noopLogger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { formatMicroTime, parseTime } from '#kube/time.ts';

export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}
export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

export interface LeaderElectionOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  identity?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  clock?: Clock;
  logger?: Logger;
  onStartedLeading?: () => void;
  // Called once when leadership ends: lost (renew failed) or released on stop().
  onStoppedLeading?: (reason: 'lost' | 'released') => void;
  onNewLeader?: (identity: string) => void;
  rng?: () => number;
}

export function defaultIdentity(): string {
  return `${hostname()}_${randomBytes(4).toString('hex')}`;
}

export class LeaderElector {
  readonly identity: string;
  private readonly opts: LeaderElectionOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly rng: () => number;
  private abort = new AbortController();
  private running: Promise<void> | undefined;
  private release = true;
  private leading = false;
  private observed: { record: string; at: number; lease: Lease } | undefined;
  private lastRenew = 0;
  private stale = false;
  private currentLeader = '';

  constructor(opts: LeaderElectionOptions) {
    this.opts = opts;
    this.identity = opts.identity ?? defaultIdentity();
    this.clock = opts.clock ?? systemClock;
    this.rng = opts.rng ?? Math.random;
    this.leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = opts.retryPeriodMs ?? 2_000;
    if (this.renewDeadlineMs >= this.leaseDurationMs)
      throw new Error('renewDeadline must be below leaseDuration');
    if (this.leaseDurationMs < 1000)
      throw new Error('leaseDuration is at least 1 s (the Lease stores seconds)');
    this.log = (opts.logger ?? noopLogger).child({
      lease: `${opts.namespace}/${opts.name}`,
      identity: this.identity,
    });
  }

  start(): void {
    if (this.running) return;
    this.abort = new AbortController();
    this.running = this.run();
  }

  // Ends the election. With release (the default), a held lease is handed back at once;
  // without it the lease simply expires (what a crash looks like to the others).
  async stop(opts: { release?: boolean } = {}): Promise<void> {
    this.release = opts.release ?? true;
    this.abort.abort();
    await this.running;
    this.running = undefined;
  }

  // Resolves when the loop has ended (leadership lost, or stop()).
  done(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  isLeader(): boolean {
    return this.leading;
  }

  leader(): string {
    return this.currentLeader;
  }

  // A leader that has not renewed for longer than the lease is wedged (client-go's
  // healthz adaptor); a candidate is healthy.
  isHealthy(graceMs = 20_000): boolean {
    return !this.leading || this.clock.now() - this.lastRenew <= this.leaseDurationMs + graceMs;
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    // Acquire.
    while (!signal.aborted && !(await this.tryAcquireOrRenew())) {
      await sleep(this.clock, this.jittered(this.retryPeriodMs), signal);
    }
    if (signal.aborted) return;
    this.leading = true;
    this.log.info('acquired lease');
    this.opts.onStartedLeading?.();
    // Renew until we cannot (lost) or are stopped (released or abandoned).
    while (!signal.aborted) {
      await sleep(this.clock, this.retryPeriodMs, signal);
      if (signal.aborted) break;
      if (await this.tryAcquireOrRenew()) continue;
      if (this.clock.now() - this.lastRenew >= this.renewDeadlineMs) {
        this.leading = false;
        this.log.warn('failed to renew lease within the renew deadline: stepping down');
        this.opts.onStoppedLeading?.('lost');
        return;
      }
    }
    if (this.release) await this.releaseLease();
    this.leading = false;
    this.opts.onStoppedLeading?.('released');
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = this.clock.now();
    const { client, namespace, name } = this.opts;
    try {
      // A leader renews from the lease it last wrote; a conflict makes it read again.
      const lease =
        this.leading && this.observed && !this.stale
          ? this.observed.lease
          : await client.get<Lease>(Resources.leases, namespace, name);
      this.stale = false;
      if (!lease) return await this.createLease(now);
      // Seen now, after the read: a renewal written while the read was in flight is newer
      // than `now`, and counting its lease from `now` would take it up to one read early.
      this.observe(lease, this.clock.now());
      if (this.isHeldByOther(lease, now)) return false;
      const spec = lease.spec ?? {};
      const mine = spec.holderIdentity === this.identity;
      const updated = await client.replace<Lease>(Resources.leases, {
        ...lease,
        spec: this.buildRecord(now, {
          acquireTime: mine && spec.acquireTime ? spec.acquireTime : formatMicroTime(now),
          leaseTransitions: (spec.leaseTransitions ?? 0) + (mine ? 0 : 1),
        }),
      });
      this.observe(updated, now);
      this.lastRenew = now;
      return true;
    } catch (err) {
      this.stale = true;
      if (!isConflict(err) && !isAlreadyExists(err)) {
        this.log.warn('lease request failed', { error: err instanceof Error ? err : String(err) });
      }
      return false;
    }
  }

  // Held by another candidate whose record changed less than its lease duration ago.
  private isHeldByOther(lease: Lease, now: number): boolean {
    const holder = lease.spec?.holderIdentity ?? '';
    if (holder === '' || holder === this.identity) return false;
    const leaseMs = (lease.spec?.leaseDurationSeconds ?? 0) * 1000;
    return (this.observed?.at ?? now) + leaseMs > now;
  }

  private async createLease(now: number): Promise<boolean> {
    const { client, namespace, name } = this.opts;
    const created = await client.create<Lease>(Resources.leases, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name, namespace },
      spec: this.buildRecord(now, { acquireTime: formatMicroTime(now), leaseTransitions: 0 }),
    });
    this.observe(created, now);
    this.lastRenew = now;
    return true;
  }

  private buildRecord(now: number, rest: { acquireTime: string; leaseTransitions: number }): LeaseSpec {
    return {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000),
      renewTime: formatMicroTime(now),
      ...rest,
    };
  }

  // Remembers when the record last changed, on our clock: that is what expiry means.
  private observe(lease: Lease, now: number): void {
    const spec = lease.spec ?? {};
    const record = JSON.stringify([
      spec.holderIdentity,
      spec.renewTime,
      spec.acquireTime,
      spec.leaseTransitions,
    ]);
    if (this.observed?.record !== record) this.observed = { record, at: now, lease };
    else this.observed = { ...this.observed, lease };
    const holder = spec.holderIdentity ?? '';
    if (holder !== this.currentLeader) {
      this.currentLeader = holder;
      if (holder) this.opts.onNewLeader?.(holder);
    }
  }

  private async releaseLease(): Promise<void> {
    const lease = this.observed?.lease;
    if (!lease || lease.spec?.holderIdentity !== this.identity) return;
    const now = this.clock.now();
    try {
      await this.opts.client.replace<Lease>(Resources.leases, {
        ...lease,
        spec: {
          ...lease.spec,
          holderIdentity: '',
          leaseDurationSeconds: 1,
          acquireTime: formatMicroTime(now),
          renewTime: formatMicroTime(now),
        },
      });
      this.log.info('released lease');
    } catch (err) {
      this.log.warn('failed to release lease; it will expire', {
        error: err instanceof Error ? err : String(err),
      });
    }
  }

  private jittered(ms: number): number {
    return Math.round(ms * (1 + 0.2 * this.rng()));
  }
}

// Age of a lease's last renewal, for diagnostics.
export function leaseAgeMs(lease: Lease, now: number): number | undefined {
  const t = parseTime(lease.spec?.renewTime);
  return t === undefined ? undefined : now - t;
}
