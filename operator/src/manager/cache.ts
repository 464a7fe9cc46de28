// What controllers read: the cache of one resource type over the namespaces the manager
// watches. One Informer is such a cache (one namespace, or all of them); with a list of
// namespaces (`--namespace a,b`) it is one Informer per namespace joined here, because a
// Role in each namespace allows a list and watch there and nothing wider: a cluster-wide
// list would need a ClusterRole, which is what the namespaced install leaves out.
import type { EventHandler } from '#kube/informer.ts';
import { Informer } from '#kube/informer.ts';
import type { InformerOptions } from '#kube/informer.ts';
import { parseKey } from '#kube/objects.ts';
import type { KubeObject } from '#kube/objects.ts';
import type { ResourceType } from '#kube/resources.ts';

export interface ResourceCache<T extends KubeObject = KubeObject> {
  readonly resource: ResourceType;
  addEventHandler(handler: EventHandler<T>): () => void;
  start(): void;
  stop(): Promise<void>;
  hasSynced(): boolean;
  waitForSync(signal?: AbortSignal): Promise<boolean>;
  get(namespace: string, name: string): T | undefined;
  getByKey(key: string): T | undefined;
  list(filter?: { namespace?: string; labels?: Record<string, string> }): T[];
  size(): number;
}

/** One Informer per listed namespace, read as one cache. */
export class NamespacedInformers<T extends KubeObject = KubeObject> implements ResourceCache<T> {
  readonly resource: ResourceType;
  private readonly byNamespace: ReadonlyMap<string, Informer<T>>;

  constructor(namespaces: readonly string[], opts: Omit<InformerOptions, 'namespace'>) {
    if (!opts.resource.namespaced) throw new Error(`${opts.resource.resource} is not namespaced`);
    if (namespaces.length === 0) throw new Error('no namespace to watch: use one Informer for all');
    this.resource = opts.resource;
    this.byNamespace = new Map(namespaces.map((ns) => [ns, new Informer<T>({ ...opts, namespace: ns })]));
  }

  private get informers(): Informer<T>[] {
    return [...this.byNamespace.values()];
  }

  addEventHandler(handler: EventHandler<T>): () => void {
    const removers = this.informers.map((i) => i.addEventHandler(handler));
    return () => removers.forEach((remove) => remove());
  }

  start(): void {
    for (const i of this.informers) i.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.informers.map((i) => i.stop()));
  }

  hasSynced(): boolean {
    return this.informers.every((i) => i.hasSynced());
  }

  async waitForSync(signal?: AbortSignal): Promise<boolean> {
    const synced = await Promise.all(this.informers.map((i) => i.waitForSync(signal)));
    return synced.every(Boolean);
  }

  // An object of a namespace outside the list is not in the cache: undefined, as for one
  // that does not exist.
  get(namespace: string, name: string): T | undefined {
    return this.byNamespace.get(namespace)?.get(namespace, name);
  }

  getByKey(key: string): T | undefined {
    const { namespace, name } = parseKey(key);
    return this.get(namespace, name);
  }

  list(filter: { namespace?: string; labels?: Record<string, string> } = {}): T[] {
    if (filter.namespace !== undefined) return this.byNamespace.get(filter.namespace)?.list(filter) ?? [];
    return this.informers.flatMap((i) => i.list(filter));
  }

  size(): number {
    return this.informers.reduce((n, i) => n + i.size(), 0);
  }
}
