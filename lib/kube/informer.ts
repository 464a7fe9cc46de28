// An informer: list + watch of one resource type into an in-memory store keyed
// `namespace/name`, with event handlers, periodic resync and its own reconnect policy.
//
// The loop, as client-go's reflector runs it:
//   list (paginated, a consistent read) → replace the store, diffing into add/update/
//   delete handler calls → watch from the list's resourceVersion with bookmarks, each
//   event (and bookmark) advancing the resourceVersion → when the server ends the
//   stream after a healthy while, watch again at once from the last resourceVersion →
//   on 410 Gone (the version was compacted away) list again → on any other error, or a
//   stream that closes early, back off exponentially (with jitter) and retry.
// The JS client's ListWatch stops on errors other than 410; this loop never stops until
// stop() is called.
import type { Backoff, Clock, Timer } from './clock.ts';
import { createBackoff, sleep, systemClock } from './clock.ts';
import { isGone } from './client.ts';
import type { ListOptions, WatchOptions } from './client.ts';
import type { Logger } from './logger.ts';
import { noopLogger } from './logger.ts';
import { WatchEventType, cacheKeyOf, formatKey } from './objects.ts';
import type { KubeList, KubeObject, KubeStatus, WatchEvent } from './objects.ts';
import { resourceLabel } from './resources.ts';
import type { ResourceType } from './resources.ts';

// The two calls an informer needs; KubeClient provides them.
export interface ListerWatcher {
  list<T extends KubeObject>(rt: ResourceType, opts?: ListOptions): Promise<KubeList<T>>;
  watch<T extends KubeObject>(rt: ResourceType, opts: WatchOptions): AsyncIterable<WatchEvent<T>>;
}

export interface EventHandler<T extends KubeObject> {
  onAdd?(obj: T): void;
  // Also called by resync with oldObj === newObj.
  onUpdate?(oldObj: T, newObj: T): void;
  // obj is the last state known (after a relist, possibly not the final one).
  onDelete?(obj: T): void;
}

export interface InformerOptions {
  client: ListerWatcher;
  resource: ResourceType;
  // Omit for all namespaces.
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  // Replays every cached object as an update this often; 0 disables.
  resyncPeriodMs?: number;
  logger?: Logger;
  clock?: Clock;
  backoff?: Backoff;
  pageSize?: number;
  // The server ends each watch after a random time in [min, 2*min) seconds.
  minWatchTimeoutSeconds?: number;
  // A watch that ends sooner than this is a failure (backoff), not routine.
  minHealthyWatchMs?: number;
  rng?: () => number;
}

export class Informer<T extends KubeObject = KubeObject> {
  readonly resource: ResourceType;
  private readonly opts: InformerOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly backoff: Backoff;
  private readonly rng: () => number;
  private readonly store = new Map<string, T>();
  private readonly handlers = new Set<EventHandler<T>>();
  private readonly syncWaiters: (() => void)[] = [];
  private abort = new AbortController();
  private watchAbort: AbortController | undefined;
  private running: Promise<void> | undefined;
  private resyncTimer: Timer | undefined;
  private synced = false;
  private rv = '';
  private stats = { lists: 0, watches: 0, relistsOnGone: 0, errors: 0 };

  constructor(opts: InformerOptions) {
    this.opts = opts;
    this.resource = opts.resource;
    this.clock = opts.clock ?? systemClock;
    this.rng = opts.rng ?? Math.random;
    this.log = (opts.logger ?? noopLogger).child({
      informer: resourceLabel(opts.resource),
      ...(opts.namespace ? { namespace: opts.namespace } : {}),
      ...(opts.labelSelector ? { labelSelector: opts.labelSelector } : {}),
    });
    this.backoff = opts.backoff ?? createBackoff({ initialMs: 800, maxMs: 30_000, rng: this.rng });
  }

  // Registers handlers; once synced, the current contents are replayed as adds first,
  // so a late handler sees the same world as an early one. Returns an unsubscribe.
  addEventHandler(handler: EventHandler<T>): () => void {
    this.handlers.add(handler);
    if (this.synced) for (const obj of this.store.values()) this.call(handler, 'onAdd', obj);
    return () => void this.handlers.delete(handler);
  }

  start(): void {
    if (this.running) return;
    this.abort = new AbortController();
    this.running = this.run();
    this.scheduleResync();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    if (this.resyncTimer) this.resyncTimer.cancel();
    this.resyncTimer = undefined;
    await this.running;
    this.running = undefined;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  waitForSync(signal?: AbortSignal): Promise<boolean> {
    if (this.synced) return Promise.resolve(true);
    return new Promise((resolve) => {
      const onAbort = (): void => resolve(false);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.syncWaiters.push(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve(true);
      });
    });
  }

  get(namespace: string, name: string): T | undefined {
    return this.store.get(formatKey({ namespace, name }));
  }

  getByKey(key: string): T | undefined {
    return this.store.get(key);
  }

  // Cached objects, optionally in one namespace and matching all given labels.
  list(filter: { namespace?: string; labels?: Record<string, string> } = {}): T[] {
    const out: T[] = [];
    for (const obj of this.store.values()) {
      if (filter.namespace !== undefined && (obj.metadata?.namespace ?? '') !== filter.namespace) continue;
      if (filter.labels && !matchesLabels(obj, filter.labels)) continue;
      out.push(obj);
    }
    return out;
  }

  size(): number {
    return this.store.size;
  }

  lastSyncResourceVersion(): string {
    return this.rv;
  }

  statistics(): Readonly<typeof this.stats> {
    return { ...this.stats };
  }

  // Ends the current watch as a dropped connection would (tests, diagnostics).
  interruptWatch(): void {
    this.watchAbort?.abort(new Error('watch interrupted'));
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    let needList = true;
    while (!signal.aborted) {
      try {
        if (needList) {
          await this.relist();
          needList = false;
        }
        const started = this.clock.now();
        const outcome = await this.watchOnce();
        if (signal.aborted) break;
        if (outcome === 'gone') {
          this.stats.relistsOnGone++;
          this.log.info('watch expired (410 Gone): relisting', { resourceVersion: this.rv });
          needList = true;
          continue;
        }
        if (this.clock.now() - started >= (this.opts.minHealthyWatchMs ?? 1000)) {
          this.backoff.reset();
          continue;
        }
        const delay = this.backoff.next();
        this.log.debug('watch closed early: reconnecting after backoff', { delayMs: delay });
        await sleep(this.clock, delay, signal);
      } catch (err) {
        if (signal.aborted) break;
        if (isGone(err)) {
          this.stats.relistsOnGone++;
          this.log.info('resource version expired (410 Gone): relisting', { resourceVersion: this.rv });
          needList = true;
          continue;
        }
        this.stats.errors++;
        const delay = this.backoff.next();
        this.log.warn('list/watch failed: retrying after backoff', {
          error: err instanceof Error ? err : String(err),
          delayMs: delay,
        });
        await sleep(this.clock, delay, signal);
      }
    }
  }

  private async relist(): Promise<void> {
    this.stats.lists++;
    const items: T[] = [];
    let cont: string | undefined;
    let rv: string | undefined;
    do {
      const page = await this.opts.client.list<T>(this.resource, {
        namespace: this.opts.namespace,
        labelSelector: this.opts.labelSelector,
        fieldSelector: this.opts.fieldSelector,
        limit: this.opts.pageSize ?? 500,
        continue: cont,
      });
      items.push(...page.items);
      cont = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion ?? '';
    } while (cont);
    this.replace(items, rv ?? '');
  }

  // Swaps in a fresh list, calling handlers for what changed since the cache's view.
  private replace(items: T[], rv: string): void {
    const fresh = new Map<string, T>();
    for (const item of items) fresh.set(cacheKeyOf(item), withTypeMeta(item, this.resource));
    const old = new Map(this.store);
    this.store.clear();
    for (const [k, v] of fresh) this.store.set(k, v);
    this.rv = rv;
    for (const [k, obj] of fresh) {
      const prev = old.get(k);
      if (!prev) this.emit('onAdd', obj);
      else if (prev.metadata?.resourceVersion !== obj.metadata?.resourceVersion)
        this.emit('onUpdate', prev, obj);
    }
    for (const [k, prev] of old) if (!fresh.has(k)) this.emit('onDelete', prev);
    if (!this.synced) {
      this.synced = true;
      this.log.debug('synced', { objects: this.store.size, resourceVersion: rv });
      for (const w of this.syncWaiters.splice(0)) w();
    }
  }

  private async watchOnce(): Promise<'gone' | 'closed'> {
    this.stats.watches++;
    const min = this.opts.minWatchTimeoutSeconds ?? 300;
    this.watchAbort = new AbortController();
    const signal = AbortSignal.any([this.abort.signal, this.watchAbort.signal]);
    try {
      const events = this.opts.client.watch<T>(this.resource, {
        namespace: this.opts.namespace,
        labelSelector: this.opts.labelSelector,
        fieldSelector: this.opts.fieldSelector,
        resourceVersion: this.rv,
        allowWatchBookmarks: true,
        timeoutSeconds: Math.floor(min * (1 + this.rng())),
        signal,
      });
      for await (const ev of events) {
        if (ev.type === WatchEventType.error) {
          const status = ev.object as unknown as KubeStatus;
          if (status.code === 410 || status.reason === 'Expired' || status.reason === 'Gone') return 'gone';
          throw new Error(
            `watch error event: ${status.code ?? '?'} ${status.reason ?? ''}: ${status.message ?? ''}`,
          );
        }
        this.handleEvent(ev);
      }
      return 'closed';
    } catch (err) {
      // Our own interruption reads as a dropped connection: reconnect with backoff.
      if (this.watchAbort.signal.aborted && !this.abort.signal.aborted) {
        throw new Error('watch interrupted', { cause: err });
      }
      throw err;
    } finally {
      this.watchAbort = undefined;
    }
  }

  private handleEvent(ev: WatchEvent<T>): void {
    const rv = ev.object.metadata?.resourceVersion;
    if (ev.type === WatchEventType.bookmark) {
      if (rv) this.rv = rv;
      return;
    }
    const obj = withTypeMeta(ev.object, this.resource);
    const key = cacheKeyOf(obj);
    const prev = this.store.get(key);
    if (ev.type === WatchEventType.deleted) {
      this.store.delete(key);
      this.emit('onDelete', obj);
    } else {
      this.store.set(key, obj);
      if (prev) this.emit('onUpdate', prev, obj);
      else this.emit('onAdd', obj);
    }
    if (rv) this.rv = rv;
  }

  private scheduleResync(): void {
    const period = this.opts.resyncPeriodMs ?? 0;
    if (period <= 0 || this.abort.signal.aborted) return;
    // Jitter spreads resyncs of many informers (controller-runtime: up to +10%).
    const delay = Math.round(period * (1 + 0.1 * this.rng()));
    this.resyncTimer = this.clock.setTimer(delay, () => {
      if (this.synced) for (const obj of this.store.values()) this.emit('onUpdate', obj, obj);
      this.scheduleResync();
    });
  }

  private emit(kind: 'onAdd' | 'onDelete', obj: T): void;
  private emit(kind: 'onUpdate', oldObj: T, newObj: T): void;
  private emit(kind: keyof EventHandler<T>, a: T, b?: T): void {
    for (const h of this.handlers) this.call(h, kind, a, b);
  }

  private call(h: EventHandler<T>, kind: keyof EventHandler<T>, a: T, b?: T): void {
    try {
      if (kind === 'onUpdate') h.onUpdate?.(a, b ?? a);
      else h[kind]?.(a);
    } catch (err) {
      this.log.error('event handler threw', {
        error: err instanceof Error ? err : String(err),
        handler: kind,
      });
    }
  }
}

// List items come without apiVersion/kind; handlers and owner mapping want them.
function withTypeMeta<T extends KubeObject>(obj: T, rt: ResourceType): T {
  if (obj.kind && obj.apiVersion) return obj;
  obj.apiVersion = rt.group ? `${rt.group}/${rt.version}` : rt.version;
  obj.kind = rt.kind;
  return obj;
}

export function matchesLabels(obj: KubeObject, labels: Record<string, string>): boolean {
  const have = obj.metadata?.labels ?? {};
  return Object.entries(labels).every(([k, v]) => have[k] === v);
}
