// A cache over a list of namespaces asks the API server only inside those namespaces
// (what a Role in each allows) and reads as one cache.
import { describe, expect, it } from 'vitest';
import { NamespacedInformers } from './cache.ts';
import type { ListOptions, WatchOptions } from '#kube/client.ts';
import type { ListerWatcher } from '#kube/informer.ts';
import type { KubeList, KubeObject, WatchEvent } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';

const cm = (namespace: string, name: string): KubeObject => ({
  metadata: { namespace, name, resourceVersion: '1' },
});

// Serves each namespace's objects; a request without a namespace (cluster-wide) sees all.
function server(objects: KubeObject[]): ListerWatcher & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    list: <T extends KubeObject>(_rt: unknown, o?: ListOptions): Promise<KubeList<T>> => {
      asked.push(`list ${o?.namespace ?? '*'}`);
      const items = objects.filter((x) => !o?.namespace || x.metadata?.namespace === o.namespace);
      return Promise.resolve({ metadata: { resourceVersion: '1' }, items: items as T[] });
    },
    watch: async function* <T extends KubeObject>(
      _rt: unknown,
      o: WatchOptions,
    ): AsyncGenerator<WatchEvent<T>> {
      asked.push(`watch ${o.namespace ?? '*'}`);
      await new Promise<void>((resolve) => {
        if (o.signal?.aborted) return resolve();
        o.signal?.addEventListener('abort', () => resolve());
      });
      // A quiet watch: no event until stopped.
      yield* [];
    },
  };
}

describe('NamespacedInformers', () => {
  it('lists and watches in each listed namespace only, and reads as one cache', async () => {
    const source = server([cm('a', 'x'), cm('b', 'y'), cm('c', 'z')]);
    const cache = new NamespacedInformers(['a', 'b'], { client: source, resource: Resources.configMaps });
    const added: string[] = [];
    cache.addEventHandler({ onAdd: (o) => added.push(`${o.metadata?.namespace}/${o.metadata?.name}`) });
    cache.start();
    expect(await cache.waitForSync()).toBe(true);
    expect(cache.hasSynced()).toBe(true);
    expect(added.sort()).toEqual(['a/x', 'b/y']);
    expect(cache.get('a', 'x')?.metadata?.name).toBe('x');
    expect(cache.getByKey('b/y')?.metadata?.name).toBe('y');
    // Outside the list: not cached, as if absent.
    expect(cache.get('c', 'z')).toBeUndefined();
    expect(cache.list({ namespace: 'c' })).toEqual([]);
    expect(cache.list({ namespace: 'b' }).map((o) => o.metadata?.name)).toEqual(['y']);
    expect(cache.list().map((o) => o.metadata?.name)).toEqual(['x', 'y']);
    expect(cache.size()).toBe(2);
    await cache.stop();
    expect(source.asked.filter((r) => r.startsWith('list')).sort()).toEqual(['list a', 'list b']);
    expect(source.asked).not.toContain('list *');
    expect(source.asked).not.toContain('watch *');
  });

  it('refuses a cluster-scoped resource or an empty list (one Informer watches all)', () => {
    const client = server([]);
    expect(() => new NamespacedInformers(['a'], { client, resource: Resources.nodes })).toThrow(
      'nodes is not namespaced',
    );
    expect(() => new NamespacedInformers([], { client, resource: Resources.pods })).toThrow(
      'no namespace to watch',
    );
  });
});
