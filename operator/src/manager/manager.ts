// The manager wires informers → work queues → reconcilers for a set of controllers.
//
// - Informers are shared per (resource, label selector) and start at once, so caches
//   are warm when this instance becomes leader; reconcilers run only while leading.
// - Namespaces: all, or a list (one informer per listed namespace, cache.ts). A key
//   outside the list is never queued: reconcilers read and write only in their key's
//   namespace (every reference in the API is same-namespace), so nothing the operator
//   does leaves the namespaces it was given.
// - Each controller has a primary kind (its keys), owned kinds (mapped to the owner's
//   key through the controller owner reference) and extra watches with a map function.
// - Workers start after every informer has synced; a reconcile's error requeues the
//   key with backoff, a TerminalError does not, requeueAfterMs polls.
// - stop() (SIGTERM): stop queue intake, let in-flight reconciles finish (bounded by
//   the grace period, then their signal aborts), release the lease so the next
//   instance takes over at once, stop informers and the HTTP server.
// - Losing the lease is fatal, as in controller-runtime: the process should exit and be
//   restarted as a candidate, because a deposed leader's in-memory state is suspect.
import type { AddressInfo } from 'node:net';
import { NamespacedInformers } from './cache.ts';
import type { ResourceCache } from './cache.ts';
import type { KubeClient } from '#kube/client.ts';
import { isConflict } from '#kube/client.ts';
import type { Clock, Timer } from '#kube/clock.ts';
import { systemClock } from '#kube/clock.ts';
import type { EventRecorder } from './events.ts';
import { createEventRecorder } from './events.ts';
import { startHealthServer } from './health-server.ts';
import type { HealthServer } from './health-server.ts';
import { Informer } from '#kube/informer.ts';
import { LeaderElector, defaultIdentity, type LeaderElectionOptions } from './leader.ts';
import type { Logger } from '#kube/logger.ts';
import { noopLogger } from '#kube/logger.ts';
import { buildQueueMetrics, buildRequestMetricsObserver, createRuntimeMetrics } from './metrics.ts';
import type { RuntimeMetrics } from './metrics.ts';
import { controllerOf, formatKey, keyOf, parseKey } from '#kube/objects.ts';
import type { KubeObject, ObjectKey } from '#kube/objects.ts';
import { isTerminalError } from './reconcile.ts';
import type { Reconciler } from './reconcile.ts';
import { refersTo, resourceLabel } from '#kube/resources.ts';
import type { ResourceType } from '#kube/resources.ts';
import { WorkQueue, runWorkers } from './workqueue.ts';
import { traceReconciler } from './reconcile-spans.ts';

export interface Watch {
  resource: ResourceType;
  labelSelector?: string;
  /**
   * Only this namespace, whatever the manager watches: an object the operator reads where it
   * reconciles nothing (the chart's picker Service in the release namespace), granted by a Role
   * there alone.
   */
  namespace?: string;
  // Keys of the primary objects to reconcile when this object changes.
  map(obj: KubeObject): ObjectKey[];
}

export interface ControllerDefinition {
  name: string;
  primary: ResourceType;
  // The key a primary object's change queues; default its own. A controller of one object
  // made from many (the gateway's keys Secret from every Tenant) maps them all to that one.
  primaryKey?: (obj: KubeObject) => ObjectKey;
  owns?: readonly ResourceType[];
  watches?: readonly Watch[];
  reconciler: Reconciler;
  concurrency?: number;
}

export interface ManagerOptions {
  client: KubeClient;
  logger?: Logger;
  metrics?: RuntimeMetrics;
  clock?: Clock;
  // Namespaces to watch; undefined or empty: all namespaces.
  namespaces?: readonly string[];
  // Label selectors for the cache of a resource (e.g. only our pods), by resourceLabel.
  cacheSelectors?: Record<string, string>;
  // Every object is reconciled again this often (controller-runtime: 10 h).
  syncPeriodMs?: number;
  // The lease and its timings; the manager supplies the client, clock, logger and callbacks.
  leaderElection?:
    | false
    | Pick<
        LeaderElectionOptions,
        'namespace' | 'name' | 'identity' | 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'
      >;
  // /healthz, /readyz, /metrics; port 0 picks a free one.
  http?: false | { host?: string; port: number };
  gracefulShutdownMs?: number;
  // The identity events are reported with; default the election identity.
  instance?: string;
}

interface RunningController {
  def: ControllerDefinition;
  queue: WorkQueue<string>;
  workers: Promise<void> | undefined;
}

export type ManagerExit = { reason: 'stopped' } | { reason: 'leadership-lost' };

export class Manager {
  readonly client: KubeClient;
  readonly metrics: RuntimeMetrics;
  readonly events: EventRecorder;
  private readonly opts: ManagerOptions;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly informers = new Map<string, ResourceCache>();
  // The watched namespaces; undefined: all.
  private readonly namespaces: ReadonlySet<string> | undefined;
  private readonly controllers: RunningController[] = [];
  private readonly elector: LeaderElector | undefined;
  private readonly reconcileAbort = new AbortController();
  // Aborted as soon as stop() begins: background work a controller started (warm-ups) ends at once.
  private readonly stopAbort = new AbortController();
  private server: HealthServer | undefined;
  private started = false;
  private stopping: Promise<void> | undefined;
  private leading = false;
  private lost = false;
  private exit: ((e: ManagerExit) => void) | undefined;
  private readonly exited = new Promise<ManagerExit>((resolve) => (this.exit = resolve));
  private exitReason: ManagerExit = { reason: 'stopped' };

  constructor(opts: ManagerOptions) {
    this.opts = opts;
    this.client = opts.client;
    this.log = opts.logger ?? noopLogger;
    this.clock = opts.clock ?? systemClock;
    this.namespaces = opts.namespaces?.length ? new Set(opts.namespaces) : undefined;
    this.metrics = opts.metrics ?? createRuntimeMetrics(undefined, () => this.clock.now());
    this.client.observe(buildRequestMetricsObserver(this.metrics));
    const le = opts.leaderElection;
    const identity = (le && le.identity) || defaultIdentity();
    if (le) {
      this.elector = new LeaderElector({
        ...le,
        identity,
        client: this.client,
        clock: this.clock,
        logger: this.log,
        onStartedLeading: () => this.onStartedLeading(),
        onStoppedLeading: (why) => this.onStoppedLeading(why),
        onNewLeader: (id) => this.log.info('new leader', { leader: id }),
      });
    }
    this.events = createEventRecorder({
      client: this.client,
      reportingInstance: opts.instance ?? identity,
      clock: this.clock,
      logger: this.log.child({ component: 'events' }),
    });
  }

  // The shared informer (cache) of a resource; reconcilers read through it. With `namespace`,
  // of that one namespace only, watched or not (see Watch.namespace).
  informer<T extends KubeObject = KubeObject>(
    rt: ResourceType,
    labelSelector?: string,
    namespace?: string,
  ): ResourceCache<T> {
    const selector = labelSelector ?? this.opts.cacheSelectors?.[resourceLabel(rt)];
    const id = `${resourceLabel(rt)}?${selector ?? ''}${namespace === undefined ? '' : `@${namespace}`}`;
    let inf = this.informers.get(id);
    if (!inf) {
      const opts = {
        client: this.client,
        resource: rt,
        labelSelector: selector,
        resyncPeriodMs: this.opts.syncPeriodMs ?? 10 * 3600_000,
        logger: this.log,
        clock: this.clock,
      };
      inf =
        namespace !== undefined
          ? new Informer({ ...opts, namespace })
          : rt.namespaced && this.namespaces
            ? new NamespacedInformers([...this.namespaces], opts)
            : new Informer(opts);
      this.informers.set(id, inf);
      if (this.started) inf.start();
    }
    return inf as unknown as ResourceCache<T>;
  }

  /** The manager's logger, for workers that run beside the controllers. */
  get logger(): Logger {
    return this.log;
  }

  // Aborted when the manager begins to stop (SIGTERM, leadership lost): for work outside reconciles.
  get stopSignal(): AbortSignal {
    return this.stopAbort.signal;
  }

  // Queues a key of a controller from outside its watches: background work that finished (a
  // warm-up) asks for a reconcile, which records the outcome in status (controller-runtime's
  // source.Channel). De-duplicated like any key; ignored for an unknown controller.
  enqueue(controller: string, key: ObjectKey): void {
    const c = this.controllers.find((r) => r.def.name === controller);
    if (c && this.watches(key.namespace)) c.queue.add(formatKey(key));
  }

  // Whether a key's namespace is one this manager watches ('' is a cluster-scoped object).
  watches(namespace: string): boolean {
    return namespace === '' || !this.namespaces || this.namespaces.has(namespace);
  }

  addController(def: ControllerDefinition): void {
    if (this.started) throw new Error('add controllers before start()');
    const queue = new WorkQueue<string>({
      clock: this.clock,
      metrics: buildQueueMetrics(this.metrics, def.name),
    });
    const enqueue = (k: ObjectKey): void => {
      if (this.watches(k.namespace)) queue.add(formatKey(k));
      else this.log.debug('not queued: namespace not watched', { controller: def.name, key: formatKey(k) });
    };
    const primaryKey = def.primaryKey ?? keyOf;
    this.informer(def.primary).addEventHandler({
      onAdd: (o) => enqueue(primaryKey(o)),
      onUpdate: (_old, o) => enqueue(primaryKey(o)),
      onDelete: (o) => enqueue(primaryKey(o)),
    });
    const toOwner = (o: KubeObject): void => {
      const ref = controllerOf(o);
      if (ref && refersTo(ref, def.primary))
        enqueue({ namespace: o.metadata?.namespace ?? '', name: ref.name });
    };
    for (const rt of def.owns ?? []) {
      // Both old and new owner: an object moved between owners concerns both.
      this.informer(rt).addEventHandler({
        onAdd: toOwner,
        onUpdate: (a, b) => (toOwner(a), toOwner(b)),
        onDelete: toOwner,
      });
    }
    for (const w of def.watches ?? []) {
      const mapped = (o: KubeObject): void => w.map(o).forEach(enqueue);
      this.informer(w.resource, w.labelSelector, w.namespace).addEventHandler({
        onAdd: mapped,
        onUpdate: (a, b) => (mapped(a), mapped(b)),
        onDelete: mapped,
      });
    }
    this.metrics.maxConcurrentReconciles.set({ controller: def.name }, def.concurrency ?? 1);
    this.metrics.inFlightSources.set(def.name, () => queue.inFlight().values());
    // A span per reconcile (no-op unless the process started tracing: tracing.ts).
    this.controllers.push({
      def: { ...def, reconciler: traceReconciler(def.name, def.reconciler) },
      queue,
      workers: undefined,
    });
  }

  // Starts informers, the probe/metrics server and the election; resolves once they
  // run. wait() tells when and why the manager ended.
  async start(): Promise<void> {
    if (this.started) throw new Error('manager already started');
    this.started = true;
    for (const inf of this.informers.values()) inf.start();
    if (this.opts.http !== false) {
      this.server = await startHealthServer({
        ...(this.opts.http ?? { port: 8081 }),
        registry: this.metrics.registry,
        healthChecks: [{ name: 'leader-election', check: () => this.elector?.isHealthy() ?? true }],
        readyChecks: [
          { name: 'informers-synced', check: () => this.hasSynced() },
          {
            name: 'leading-or-standby',
            check: () => !this.stopping && (!this.elector || this.leading || !this.lost),
          },
        ],
      });
      this.log.info('serving probes and metrics', { port: this.server.address().port });
    }
    if (this.elector) this.elector.start();
    else this.onStartedLeading();
  }

  // Resolves when the manager has stopped: stop() (SIGTERM) or lost leadership.
  wait(): Promise<ManagerExit> {
    return this.exited;
  }

  // Clean shutdown; idempotent. Safe to call from a signal handler.
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  // SIGTERM/SIGINT → stop(). Returns a function that removes the handlers.
  handleSignals(): () => void {
    const onSignal = (sig: string): void => {
      this.log.info('signal received: shutting down', { signal: sig });
      void this.stop();
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
    return () => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    };
  }

  hasSynced(): boolean {
    return [...this.informers.values()].every((i) => i.hasSynced());
  }

  isLeader(): boolean {
    return this.leading;
  }

  address(): AddressInfo | undefined {
    return this.server?.address();
  }

  private onStartedLeading(): void {
    this.leading = true;
    if (this.opts.leaderElection) this.metrics.leaderStatus.set({ name: this.opts.leaderElection.name }, 1);
    void this.startControllers();
  }

  private onStoppedLeading(why: 'lost' | 'released'): void {
    this.leading = false;
    if (this.opts.leaderElection) this.metrics.leaderStatus.set({ name: this.opts.leaderElection.name }, 0);
    if (why === 'lost' && !this.stopping) {
      this.lost = true;
      this.exitReason = { reason: 'leadership-lost' };
      this.log.error('leader election lost: stopping');
      void this.stop();
    }
  }

  private async startControllers(): Promise<void> {
    const synced = await Promise.all(
      [...this.informers.values()].map((i) => i.waitForSync(this.reconcileAbort.signal)),
    );
    if (!synced.every(Boolean) || this.stopping || !this.leading) return;
    this.log.info('caches synced: starting workers', {
      controllers: this.controllers.map((c) => c.def.name),
    });
    for (const c of this.controllers) {
      c.workers = runWorkers(c.queue, c.def.concurrency ?? 1, (key) => this.reconcileKey(c, key));
    }
  }

  private async reconcileKey(c: RunningController, key: string): Promise<void> {
    const controller = c.def.name;
    const started = this.clock.now();
    const logger = this.log.child({ controller, key });
    this.metrics.activeWorkers.inc({ controller });
    try {
      const result = await c.def.reconciler.reconcile(parseKey(key), {
        logger,
        signal: this.reconcileAbort.signal,
        now: () => new Date(this.clock.now()),
        retries: c.queue.numRequeues(key),
      });
      c.queue.forget(key);
      if (result?.requeueAfterMs !== undefined && result.requeueAfterMs > 0) {
        c.queue.addAfter(key, result.requeueAfterMs);
        this.metrics.reconcileTotal.inc({ controller, result: 'requeue_after' });
      } else {
        this.metrics.reconcileTotal.inc({ controller, result: 'success' });
      }
    } catch (err) {
      this.metrics.reconcileTotal.inc({ controller, result: 'error' });
      this.metrics.reconcileErrors.inc({ controller });
      const error = err instanceof Error ? err : new Error(String(err));
      if (isTerminalError(err)) {
        // Not retried: only a change to the object brings the key back.
        c.queue.forget(key);
        this.metrics.terminalReconcileErrors.inc({ controller });
        logger.error('reconcile failed terminally', { error });
      } else {
        c.queue.addRateLimited(key);
        // A conflict is the optimistic-concurrency routine: retry quietly.
        if (isConflict(err)) logger.debug('conflict: retrying', { error });
        else logger.error('reconcile failed: retrying', { error, retries: c.queue.numRequeues(key) });
      }
    } finally {
      this.metrics.activeWorkers.dec({ controller });
      this.metrics.reconcileTime.observe({ controller }, (this.clock.now() - started) / 1000);
    }
  }

  private async shutdown(): Promise<void> {
    this.log.info('stopping: draining work queues');
    this.stopAbort.abort();
    for (const c of this.controllers) c.queue.shutDown();
    const inFlight = Promise.all(this.controllers.map(async (c) => c.workers));
    const grace = this.opts.gracefulShutdownMs ?? 30_000;
    let timer: Timer | undefined;
    const timedOut = new Promise<'timeout'>(
      (resolve) => (timer = this.clock.setTimer(grace, () => resolve('timeout'))),
    );
    if ((await Promise.race([inFlight, timedOut])) === 'timeout') {
      this.log.warn('grace period over: aborting in-flight reconciles', { graceMs: grace });
      this.reconcileAbort.abort();
      await inFlight;
    }
    if (timer) timer.cancel();
    this.reconcileAbort.abort();
    await this.events.flush();
    // Release only after in-flight reconciles ended: no two leaders write at once.
    await this.elector?.stop({ release: true });
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
    await this.server?.close();
    this.log.info('stopped');
    this.exit?.(this.exitReason);
  }
}
