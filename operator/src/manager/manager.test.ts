// The manager's namespace list, with a scripted API: the informers ask only inside the
// listed namespaces, and no key outside them is reconciled, whatever a watch maps to.
import { describe, expect, it } from 'vitest';
import type { KubeClient, ListOptions, WatchOptions } from '#kube/client.ts';
import { Manager } from './manager.ts';
import type { KubeList, KubeObject, ObjectKey, WatchEvent } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import type { ResourceType } from '#kube/resources.ts';

const obj = (namespace: string, name: string): KubeObject => ({
  metadata: { namespace, name, resourceVersion: '1' },
});

// ConfigMaps and Secrets in namespaces a and b; a request without a namespace sees both.
function fakeClient(): { client: KubeClient; asked: string[] } {
  const store: Record<string, KubeObject[]> = {
    configmaps: [obj('a', 'in-a'), obj('b', 'in-b')],
    secrets: [obj('a', 's'), obj('b', 's')],
  };
  const asked: string[] = [];
  const client = {
    observe: () => () => undefined,
    list: <T extends KubeObject>(rt: ResourceType, o?: ListOptions): Promise<KubeList<T>> => {
      asked.push(`list ${rt.resource} ${o?.namespace ?? '*'}`);
      const items = (store[rt.resource] ?? []).filter(
        (x) => !o?.namespace || x.metadata?.namespace === o.namespace,
      );
      return Promise.resolve({ metadata: { resourceVersion: '1' }, items: items as T[] });
    },
    watch: async function* <T extends KubeObject>(
      rt: ResourceType,
      o: WatchOptions,
    ): AsyncGenerator<WatchEvent<T>> {
      asked.push(`watch ${rt.resource} ${o.namespace ?? '*'}`);
      await new Promise<void>((resolve) => {
        if (o.signal?.aborted) return resolve();
        o.signal?.addEventListener('abort', () => resolve());
      });
      // A quiet watch: no event until stopped.
      yield* [];
    },
  };
  return { client: client as unknown as KubeClient, asked };
}

describe('Manager namespaces', () => {
  it('watches only the listed namespaces and reconciles no key outside them', async () => {
    const { client, asked } = fakeClient();
    const manager = new Manager({ client, namespaces: ['a'], http: false, leaderElection: false });
    const reconciled = new Set<string>();
    manager.addController({
      name: 'test',
      primary: Resources.configMaps,
      // A map that points into another namespace (no controller of ours does; this one
      // stands for a mistake): the manager drops those keys.
      watches: [
        {
          resource: Resources.secrets,
          map: (s): ObjectKey[] => [
            { namespace: 'b', name: 'elsewhere' },
            { namespace: s.metadata?.namespace ?? '', name: 'mapped' },
          ],
        },
      ],
      reconciler: {
        reconcile: (key) => {
          reconciled.add(`${key.namespace}/${key.name}`);
          return Promise.resolve(undefined);
        },
      },
    });
    await manager.start();
    for (const end = Date.now() + 5_000; reconciled.size < 2 && Date.now() < end;)
      await new Promise((r) => setTimeout(r, 5));
    await manager.stop();
    expect([...reconciled].sort()).toEqual(['a/in-a', 'a/mapped']);
    expect(manager.watches('a')).toBe(true);
    expect(manager.watches('b')).toBe(false);
    expect(asked.filter((r) => !r.endsWith(' a'))).toEqual([]);
    expect(asked.filter((r) => r.startsWith('list')).sort()).toEqual(['list configmaps a', 'list secrets a']);
  });

  it('watches every namespace without a list', async () => {
    const { client, asked } = fakeClient();
    const manager = new Manager({ client, http: false, leaderElection: false });
    const reconciled = new Set<string>();
    manager.addController({
      name: 'test',
      primary: Resources.configMaps,
      reconciler: {
        reconcile: (key) => {
          reconciled.add(`${key.namespace}/${key.name}`);
          return Promise.resolve(undefined);
        },
      },
    });
    await manager.start();
    for (const end = Date.now() + 5_000; reconciled.size < 2 && Date.now() < end;)
      await new Promise((r) => setTimeout(r, 5));
    await manager.stop();
    expect([...reconciled].sort()).toEqual(['a/in-a', 'b/in-b']);
    expect(manager.watches('b')).toBe(true);
    expect(asked.filter((r) => r.startsWith('list'))).toEqual(['list configmaps *']);
  });
});

describe('Manager.enqueue and stopSignal', () => {
  it('reconciles a key queued from outside the watches (a settled warm-up), in watched namespaces only', async () => {
    const { client } = fakeClient();
    const manager = new Manager({ client, namespaces: ['a'], http: false, leaderElection: false });
    const reconciled = new Set<string>();
    manager.addController({
      name: 'test',
      primary: Resources.configMaps,
      reconciler: {
        reconcile: (key) => {
          reconciled.add(`${key.namespace}/${key.name}`);
          return Promise.resolve(undefined);
        },
      },
    });
    await manager.start();
    manager.enqueue('test', { namespace: 'a', name: 'from-a-worker' });
    manager.enqueue('test', { namespace: 'b', name: 'not-watched' });
    manager.enqueue('no-such-controller', { namespace: 'a', name: 'x' });
    for (const end = Date.now() + 5_000; reconciled.size < 2 && Date.now() < end;)
      await new Promise((r) => setTimeout(r, 5));
    expect(manager.stopSignal.aborted).toBe(false);
    await manager.stop();
    expect(manager.stopSignal.aborted).toBe(true);
    expect([...reconciled].sort()).toEqual(['a/from-a-worker', 'a/in-a']);
  });
});
