// An in-memory list/watch source for the discovery watcher's tests: lists and
// watches plain objects per resource, as the API server would (a
// resourceVersion a write, ADDED/MODIFIED/DELETED to every open watch).

import type { ListerWatcher } from '#kube/informer.ts';
import type { KubeList, KubeObject, WatchEvent } from '#kube/objects.ts';
import type { ResourceType } from '#kube/resources.ts';
import { Gate } from './fake-upstream.ts';

type Stream = { push(ev: WatchEvent): void };

/** Lists and watches plain objects per resource; `gate` holds lists back. */
export class MemoryApi implements ListerWatcher {
  readonly gate = new Gate();
  readonly listed: (string | undefined)[] = [];
  /** Watch events the informers have taken and processed. */
  delivered = 0;
  #objects = new Map<string, Map<string, KubeObject>>();
  #streams = new Map<string, Set<Stream>>();
  #rv = 1;

  async list<T extends KubeObject>(rt: ResourceType, opts: { namespace?: string | undefined } = {}) {
    this.listed.push(opts.namespace);
    await this.gate.wait();
    const items = [...(this.#objects.get(rt.resource)?.values() ?? [])].filter(
      (o) => opts.namespace === undefined || o.metadata?.namespace === opts.namespace,
    );
    return { items: structuredClone(items), metadata: { resourceVersion: String(this.#rv) } } as KubeList<T>;
  }

  async *watch<T extends KubeObject>(
    rt: ResourceType,
    opts: { namespace?: string | undefined; signal?: AbortSignal },
  ): AsyncGenerator<WatchEvent<T>> {
    const queue: WatchEvent[] = [];
    let wake: (() => void) | undefined;
    const stream: Stream = {
      push: (ev) => {
        if (opts.namespace !== undefined && ev.object.metadata?.namespace !== opts.namespace) return;
        queue.push(structuredClone(ev));
        wake?.();
      },
    };
    const streams = this.#streams.get(rt.resource) ?? new Set();
    this.#streams.set(rt.resource, streams.add(stream));
    opts.signal?.addEventListener('abort', () => wake?.());
    try {
      while (!opts.signal?.aborted) {
        const ev = queue.shift();
        if (ev) {
          yield ev as WatchEvent<T>;
          this.delivered++; // resumed: the informer handled it and asks for the next
        } else await new Promise<void>((r) => (wake = r));
      }
    } finally {
      streams.delete(stream);
    }
  }

  put(resource: string, obj: KubeObject): void {
    const m = obj.metadata ?? {};
    const store = this.#objects.get(resource) ?? new Map<string, KubeObject>();
    this.#objects.set(resource, store);
    const key = `${m.namespace ?? ''}/${m.name ?? ''}`;
    const type = store.has(key) ? 'MODIFIED' : 'ADDED';
    const stored = { ...obj, metadata: { ...m, resourceVersion: String(++this.#rv) } };
    store.set(key, stored);
    for (const s of this.#streams.get(resource) ?? []) s.push({ type, object: stored });
  }

  remove(resource: string, namespace: string, name: string): void {
    const store = this.#objects.get(resource);
    const obj = store?.get(`${namespace}/${name}`);
    if (!store || !obj) return;
    store.delete(`${namespace}/${name}`);
    for (const s of this.#streams.get(resource) ?? []) s.push({ type: 'DELETED', object: obj });
  }
}
