// The informer's protocol decisions with a scripted list/watch source: the real API
// server is exercised in test/integration/kube/informer.test.ts; here we drive the
// cases a real server rarely shows on demand (410 Gone, bookmarks, ERROR events).
import { describe, expect, it } from 'vitest';
import { createBackoff } from './clock.ts';
import type { ListOptions, WatchOptions } from './client.ts';
import { Informer } from './informer.ts';
import type { ListerWatcher } from './informer.ts';
import type { KubeList, KubeObject, WatchEvent } from './objects.ts';
import { Resources } from './resources.ts';

const cm = (name: string, rv: string): KubeObject => ({
  metadata: { name, namespace: 'ns', resourceVersion: rv },
});

type Step = WatchEvent[] | Error;

function scripted(lists: KubeList[], watches: Step[]): ListerWatcher & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    list: <T extends KubeObject>(_rt: unknown, _o?: ListOptions): Promise<KubeList<T>> => {
      calls.push('list');
      const next = lists.shift();
      return next ? Promise.resolve(next as KubeList<T>) : new Promise(() => undefined);
    },
    watch: async function* <T extends KubeObject>(
      _rt: unknown,
      o: WatchOptions,
    ): AsyncGenerator<WatchEvent<T>> {
      calls.push(`watch@${o.resourceVersion ?? ''}${o.allowWatchBookmarks ? '+bookmarks' : ''}`);
      const step = watches.shift();
      if (!step) {
        // Hang until stopped, as a quiet watch does.
        await new Promise<void>((resolve) => {
          if (o.signal?.aborted) return resolve();
          o.signal?.addEventListener('abort', () => resolve());
        });
        return;
      }
      if (step instanceof Error) throw step;
      for (const ev of step) yield ev as WatchEvent<T>;
      await Promise.resolve();
    },
  };
}

async function settle(inf: Informer, until: () => boolean): Promise<void> {
  // By time, not by turns: a backoff of 0 ms is still a timer, and timers lag on a loaded machine.
  for (const end = Date.now() + 5_000; !until() && Date.now() < end;)
    await new Promise((r) => setTimeout(r, 1));
  expect(until()).toBe(true);
  await inf.stop();
}

describe('Informer protocol', () => {
  it('tracks bookmarks, relists on a 410 ERROR event and diffs the relist into handler calls', async () => {
    const source = scripted(
      [
        { metadata: { resourceVersion: '10' }, items: [cm('a', '5'), cm('b', '6')] },
        { metadata: { resourceVersion: '30' }, items: [cm('a', '5'), cm('c', '25')] },
      ],
      [
        [
          { type: 'MODIFIED', object: cm('b', '11') },
          { type: 'BOOKMARK', object: { metadata: { resourceVersion: '20' } } },
          { type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } },
        ],
      ],
    );
    const seen: string[] = [];
    const inf = new Informer({
      client: source,
      resource: Resources.configMaps,
      backoff: createBackoff({ initialMs: 1, maxMs: 1 }),
    });
    inf.addEventHandler({
      onAdd: (o) => seen.push(`add ${o.metadata?.name}`),
      onUpdate: (_a, b) => seen.push(`update ${b.metadata?.name}@${b.metadata?.resourceVersion}`),
      onDelete: (o) => seen.push(`delete ${o.metadata?.name}`),
    });
    inf.start();
    await settle(inf, () => source.calls.length >= 4);
    expect(source.calls).toEqual(['list', 'watch@10+bookmarks', 'list', 'watch@30+bookmarks']);
    expect(seen).toEqual(['add a', 'add b', 'update b@11', 'add c', 'delete b']);
    expect(inf.statistics().relistsOnGone).toBe(1);
    expect(
      inf
        .list()
        .map((o) => o.metadata?.name)
        .sort(),
    ).toEqual(['a', 'c']);
  });

  it('resumes a watch that failed from the last resourceVersion, after backoff, without relisting', async () => {
    const source = scripted(
      [{ metadata: { resourceVersion: '10' }, items: [] }],
      [
        [
          { type: 'ADDED', object: cm('a', '12') },
          { type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } },
        ],
        new Error('connection reset'),
        [{ type: 'ERROR', object: { kind: 'Status', code: 500, reason: 'InternalError' } }],
      ],
    );
    const inf = new Informer({
      client: source,
      resource: Resources.configMaps,
      backoff: createBackoff({ initialMs: 0, maxMs: 0 }),
    });
    inf.start();
    await settle(inf, () => source.calls.length >= 4);
    expect(source.calls).toEqual(
      ['list', 'watch@10+bookmarks', 'watch@15+bookmarks', 'watch@15+bookmarks', 'watch@15+bookmarks'].slice(
        0,
        source.calls.length,
      ),
    );
    expect(inf.statistics().errors).toBe(2);
    expect(inf.statistics().lists).toBe(1);
  });

  it('a handler added after sync is replayed the cache as adds; a throwing handler does not stop others', async () => {
    const source = scripted([{ metadata: { resourceVersion: '1' }, items: [cm('a', '1')] }], []);
    const inf = new Informer({ client: source, resource: Resources.configMaps });
    inf.addEventHandler({
      onAdd: () => {
        throw new Error('boom');
      },
    });
    inf.start();
    await inf.waitForSync();
    const late: string[] = [];
    inf.addEventHandler({ onAdd: (o) => late.push(o.metadata?.name ?? '') });
    expect(late).toEqual(['a']);
    expect(inf.get('ns', 'a')?.kind).toBe('ConfigMap');
    await inf.stop();
  });
});
