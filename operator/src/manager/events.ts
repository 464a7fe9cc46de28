// An event recorder on events.k8s.io/v1. Repeats of one event (same object, type,
// reason, action and message) within six minutes become a series on the first Event
// (series.count, lastObservedTime) instead of new objects, and series updates are
// throttled per event; that is what keeps a hot loop from flooding etcd, as client-go's
// event broadcaster does. Recording never throws and never blocks a reconcile: writes
// happen in the background; flush() waits for them (tests, shutdown).
import { randomBytes } from 'node:crypto';
import type { KubeClient } from '#kube/client.ts';
import { isNotFound } from '#kube/client.ts';
import type { Clock, Timer } from '#kube/clock.ts';
import { systemClock } from '#kube/clock.ts';
import type { Logger } from '#kube/logger.ts';
import { noopLogger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { formatMicroTime } from '#kube/time.ts';

export const EventType = { normal: 'Normal', warning: 'Warning' } as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

export interface EventRecorder {
  event(
    regarding: KubeObject,
    type: EventType,
    reason: string,
    message: string,
    opts?: { action?: string; related?: KubeObject },
  ): void;
  flush(): Promise<void>;
}

export interface EventRecorderOptions {
  client: KubeClient;
  reportingController?: string;
  reportingInstance: string;
  clock?: Clock;
  logger?: Logger;
  // Repeats within this window join the series (client-go: 6 minutes).
  seriesWindowMs?: number;
  // At most one series update per event this often; repeats in between are batched.
  minSeriesUpdateIntervalMs?: number;
  maxCachedEvents?: number;
}

interface Entry {
  name: string;
  namespace: string;
  count: number;
  writtenCount: number;
  lastObserved: number;
  lastWritten: number;
  timer: Timer | undefined;
  chain: Promise<void>;
  body: KubeObject;
}

const NOTE_MAX = 1024;

export function createEventRecorder(opts: EventRecorderOptions): EventRecorder {
  const clock = opts.clock ?? systemClock;
  const log = opts.logger ?? noopLogger;
  const window = opts.seriesWindowMs ?? 6 * 60_000;
  const interval = opts.minSeriesUpdateIntervalMs ?? 10_000;
  const max = opts.maxCachedEvents ?? 4096;
  const cache = new Map<string, Entry>();
  const pending = new Set<Promise<void>>();

  const track = (p: Promise<void>): Promise<void> => {
    const done = p.catch((err: unknown) =>
      log.warn('event write failed', { error: err instanceof Error ? err : String(err) }),
    );
    pending.add(done);
    void done.finally(() => pending.delete(done));
    return done;
  };

  const create = (entry: Entry): Promise<void> =>
    opts.client.create(Resources.events, entry.body).then(() => undefined);

  const writeSeries = (entry: Entry): void => {
    entry.timer = undefined;
    if (entry.count === entry.writtenCount) return;
    const count = entry.count;
    entry.lastWritten = clock.now();
    entry.chain = track(
      entry.chain.then(async () => {
        const series = { count, lastObservedTime: formatMicroTime(entry.lastObserved) };
        try {
          await opts.client.patch(Resources.events, entry.namespace, entry.name, { series }, 'merge');
        } catch (err) {
          // Events expire (TTL); a series outliving its Event starts a new one.
          if (!isNotFound(err)) throw err;
          await create({ ...entry, body: { ...entry.body, series } });
        }
        entry.writtenCount = count;
      }),
    );
  };

  return {
    event(regarding, type, reason, message, extra = {}) {
      const meta = regarding.metadata ?? {};
      const namespace = meta.namespace || 'default';
      const key = [
        meta.uid ?? `${regarding.kind}/${namespace}/${meta.name}`,
        type,
        reason,
        extra.action ?? '',
        message,
      ].join('\u0000');
      const now = clock.now();
      const seen = cache.get(key);
      if (seen && now - seen.lastObserved <= window) {
        seen.count++;
        seen.lastObserved = now;
        cache.delete(key);
        cache.set(key, seen); // most recently used last
        if (seen.timer) return;
        const wait = Math.max(0, seen.lastWritten + interval - now);
        seen.timer = clock.setTimer(wait, () => writeSeries(seen));
        return;
      }
      if (seen?.timer) seen.timer.cancel();
      const name = `${meta.name ?? 'object'}.${randomBytes(8).toString('hex')}`;
      const body: KubeObject = {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        metadata: { name, namespace },
        eventTime: formatMicroTime(now),
        reportingController: opts.reportingController ?? 'cacheroute.dev/operator',
        reportingInstance: opts.reportingInstance,
        action: extra.action ?? reason,
        reason,
        type,
        note: message.length > NOTE_MAX ? `${message.slice(0, NOTE_MAX - 3)}...` : message,
        regarding: referenceTo(regarding),
        ...(extra.related ? { related: referenceTo(extra.related) } : {}),
      };
      const entry: Entry = {
        name,
        namespace,
        count: 1,
        writtenCount: 1,
        lastObserved: now,
        lastWritten: now,
        timer: undefined,
        chain: Promise.resolve(),
        body,
      };
      entry.chain = track(create(entry));
      cache.delete(key);
      cache.set(key, entry);
      if (cache.size > max) {
        const oldest = cache.keys().next().value;
        if (oldest !== undefined) cache.delete(oldest);
      }
    },
    async flush() {
      // Send batched series updates now, then wait for every write in flight.
      for (const entry of cache.values()) {
        if (entry.timer) {
          entry.timer.cancel();
          writeSeries(entry);
        }
      }
      while (pending.size > 0) await Promise.all([...pending]);
    },
  };
}

function referenceTo(obj: KubeObject): Record<string, string> {
  const meta = obj.metadata ?? {};
  const ref: Record<string, string> = {};
  if (obj.apiVersion) ref['apiVersion'] = obj.apiVersion;
  if (obj.kind) ref['kind'] = obj.kind;
  if (meta.name) ref['name'] = meta.name;
  if (meta.namespace) ref['namespace'] = meta.namespace;
  if (meta.uid) ref['uid'] = meta.uid;
  return ref;
}
