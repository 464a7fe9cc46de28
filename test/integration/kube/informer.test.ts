// The informer against a real API server: add/update/delete reach the handlers and
// the store; a label selector narrows the view; a watch broken by the network (a TCP
// proxy that drops and refuses connections) or interrupted reconnects with backoff and
// catches up with what changed meanwhile.
import { readFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import type { Server, Socket } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { createBackoff } from '#kube/clock.ts';
import { KubeClient } from '#kube/client.ts';
import { Informer } from '#kube/informer.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { createTestNamespace, eventually, kubectlOk } from '../../support/kubectl.ts';

const kubeconfig = inject('kubeconfig');
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function clientFor(configText: string): Promise<KubeClient> {
  const kc = new KubeConfig();
  kc.loadFromString(configText);
  const client = await KubeClient.fromKubeConfig(kc);
  cleanups.push(() => client.close());
  return client;
}

function startInformer(
  client: KubeClient,
  namespace: string,
  labelSelector?: string,
): {
  informer: Informer;
  seen: string[];
} {
  const seen: string[] = [];
  const informer = new Informer({
    client,
    resource: Resources.configMaps,
    namespace,
    labelSelector,
    backoff: createBackoff({ initialMs: 50, maxMs: 400 }),
  });
  const name = (o: KubeObject): string => o.metadata?.name ?? '';
  informer.addEventHandler({
    onAdd: (o) => seen.push(`add ${name(o)}`),
    onUpdate: (a, b) => {
      if (a !== b) seen.push(`update ${name(b)} ${JSON.stringify(b['data'])}`);
    },
    onDelete: (o) => seen.push(`delete ${name(o)}`),
  });
  informer.start();
  cleanups.push(() => informer.stop());
  return { informer, seen };
}

const cm = (
  ns: string,
  name: string,
  data: Record<string, string>,
  labels: Record<string, string> = {},
): string =>
  JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns, labels }, data });

// A TCP proxy in front of the API server that can cut every connection and refuse new
// ones: what a watch sees when the network or the server goes away.
async function startProxy(target: URL): Promise<{ url: string; drop(): void; refuse(on: boolean): void }> {
  const sockets = new Set<Socket>();
  let refusing = false;
  const server: Server = createServer((down) => {
    if (refusing) return void down.destroy();
    const up = connect(Number(target.port), target.hostname);
    sockets.add(down).add(up);
    const close = (): void => {
      down.destroy();
      up.destroy();
      sockets.delete(down);
      sockets.delete(up);
    };
    down.on('error', close).on('close', close);
    up.on('error', close).on('close', close);
    down.pipe(up).pipe(down);
  });
  await new Promise<void>((resolve) => server.listen(0, target.hostname, resolve));
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const port = (server.address() as { port: number }).port;
  return {
    url: `https://${target.hostname}:${port}`,
    drop: () => sockets.forEach((s) => s.destroy()),
    refuse: (on) => void (refusing = on),
  };
}

describe('runtime informer', () => {
  it('sees adds, updates and deletes, in its store and through its handlers', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-inf');
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: cm(ns, 'before', { a: '1' }) });
    const { informer, seen } = startInformer(await clientFor(readFileSync(kubeconfig, 'utf8')), ns);
    expect(await informer.waitForSync()).toBe(true);
    expect(informer.hasSynced()).toBe(true);
    expect(seen).toEqual(['add before']);

    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: cm(ns, 'one', { a: '1' }) });
    await kubectlOk(['patch', 'configmap', 'one', '-n', ns, '--type=merge', '-p', '{"data":{"a":"2"}}'], {
      kubeconfig,
    });
    await kubectlOk(['delete', 'configmap', 'before', '-n', ns], { kubeconfig });
    await eventually(() =>
      expect(seen).toEqual(['add before', 'add one', 'update one {"a":"2"}', 'delete before']),
    );
    expect(informer.get(ns, 'one')?.['data']).toEqual({ a: '2' });
    expect(informer.get(ns, 'before')).toBeUndefined();
    expect(informer.list({ namespace: ns }).map((o) => o.metadata?.name)).toEqual(['one']);
    expect(Number(informer.lastSyncResourceVersion())).toBeGreaterThan(0);
  });

  it('narrows to a label selector', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-inf');
    const { informer } = startInformer(await clientFor(readFileSync(kubeconfig, 'utf8')), ns, 'team=a');
    await informer.waitForSync();
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: cm(ns, 'theirs', {}, { team: 'b' }) });
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: cm(ns, 'ours', {}, { team: 'a' }) });
    await eventually(() => expect(informer.list().map((o) => o.metadata?.name)).toEqual(['ours']));
  });

  it('reconnects after the network drops its watch and refuses connections, and catches up', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-inf');
    const text = readFileSync(kubeconfig, 'utf8');
    const server = new KubeConfig();
    server.loadFromString(text);
    const target = new URL(server.getCurrentCluster()?.server ?? '');
    const proxy = await startProxy(target);
    const { informer, seen } = startInformer(await clientFor(text.replace(target.origin, proxy.url)), ns);
    await informer.waitForSync();

    proxy.refuse(true);
    proxy.drop();
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: cm(ns, 'while-down', { a: '1' }) });
    // Several failed attempts, growing the backoff, while the server is unreachable.
    await eventually(() => expect(informer.statistics().errors).toBeGreaterThanOrEqual(2));
    expect(informer.get(ns, 'while-down')).toBeUndefined();

    proxy.refuse(false);
    await eventually(() => expect(informer.get(ns, 'while-down')).toBeDefined());
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: cm(ns, 'after', {}) });
    await eventually(() => expect(seen).toEqual(['add while-down', 'add after']));
  });

  it('an interrupted watch resumes from its resourceVersion without a relist', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-inf');
    const { informer, seen } = startInformer(await clientFor(readFileSync(kubeconfig, 'utf8')), ns);
    await informer.waitForSync();
    const lists = informer.statistics().lists;
    await eventually(() => expect(informer.statistics().watches).toBe(1));
    informer.interruptWatch();
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: cm(ns, 'meanwhile', {}) });
    await eventually(() => expect(seen).toEqual(['add meanwhile']));
    expect(informer.statistics().watches).toBeGreaterThanOrEqual(2);
    expect(informer.statistics().lists).toBe(lists);
  });

  it('stop() ends the loop and no more events arrive', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-inf');
    const { informer, seen } = startInformer(await clientFor(readFileSync(kubeconfig, 'utf8')), ns);
    await informer.waitForSync();
    await informer.stop();
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: cm(ns, 'late', {}) });
    expect(seen).toEqual([]);
    expect(informer.get(ns, 'late')).toBeUndefined();
  });
});
