// The manager end to end against a real API server, with a small controller: every
// ConfigMap labelled role=parent owns a Secret `<name>-child` carrying its data.
// Owned objects that are deleted or drift are put back (owner-reference mapping); a
// steady-state resync makes zero writes; errors retry with backoff, a TerminalError
// does not; probes and metrics are served; of two managers only the leader reconciles,
// and a clean stop releases the lease, so the other takes over without waiting for
// expiry, with no reconcile lost.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import { applyOwned } from '../../../operator/src/manager/apply.ts';
import { setControllerReference } from '../../../operator/src/manager/apply-plan.ts';
import { KubeClient } from '#kube/client.ts';
import { Manager } from '../../../operator/src/manager/manager.ts';
import type { KubeObject, ObjectKey } from '#kube/objects.ts';
import { TerminalError } from '../../../operator/src/manager/reconcile.ts';
import type { Reconciler } from '../../../operator/src/manager/reconcile.ts';
import { createRequestCounter } from '../../../operator/src/manager/request-counter.ts';
import type { RequestCounter } from '../../../operator/src/manager/request-counter.ts';
import { Resources } from '#kube/resources.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';
import { expectTakenAfterRelease, recordLeaseHistory } from '../../support/lease-history.ts';

const kubeconfig = inject('kubeconfig');

interface Harness {
  manager: Manager;
  counter: RequestCounter;
  calls: string[];
}

async function startManager(
  ns: string,
  opts: { identity?: string; syncPeriodMs?: number; failures?: Map<string, number>; leaseMs?: number } = {},
): Promise<Harness> {
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  const counter = createRequestCounter();
  const client = await KubeClient.fromKubeConfig(kc, { observers: [counter.observe] });
  const calls: string[] = [];
  const reconciler: Reconciler = {
    async reconcile(key: ObjectKey, ctx) {
      calls.push(key.name);
      const left = opts.failures?.get(key.name) ?? 0;
      if (left > 0) {
        opts.failures?.set(key.name, left - 1);
        throw new Error(`injected failure for ${key.name}`);
      }
      const parent = manager.informer(Resources.configMaps, 'role=parent').get(key.namespace, key.name);
      if (!parent || parent.metadata?.deletionTimestamp) return;
      if (parent.metadata?.labels?.['invalid'] === 'true') throw new TerminalError('invalid parent');
      const desired = setControllerReference<KubeObject>(parent, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: `${key.name}-child`, namespace: key.namespace, labels: { role: 'child' } },
        stringData: undefined,
        data: Object.fromEntries(
          Object.entries((parent['data'] as Record<string, string> | undefined) ?? {}).map(([k, v]) => [
            k,
            Buffer.from(v).toString('base64'),
          ]),
        ),
      });
      const live = manager.informer(Resources.secrets).get(key.namespace, `${key.name}-child`) ?? null;
      const r = await applyOwned(client, Resources.secrets, desired, { live, logger: ctx.logger });
      if (r.ok && r.action === 'created')
        manager.events.event(parent, 'Normal', 'Created', `created ${key.name}-child`);
    },
  };
  const manager: Manager = new Manager({
    client,
    namespaces: [ns],
    cacheSelectors: { configmaps: 'role=parent', secrets: 'role=child' },
    syncPeriodMs: opts.syncPeriodMs ?? 3600_000,
    leaderElection: {
      namespace: ns,
      name: 'rt-manager',
      identity: opts.identity ?? 'only',
      leaseDurationMs: opts.leaseMs ?? 10_000,
      renewDeadlineMs: (opts.leaseMs ?? 10_000) - 1000,
      retryPeriodMs: 200,
    },
    http: { host: '127.0.0.1', port: 0 },
    gracefulShutdownMs: 5000,
  });
  manager.addController({
    name: 'parent',
    primary: Resources.configMaps,
    owns: [Resources.secrets],
    reconciler,
    concurrency: 4,
  });
  await manager.start();
  onTestFinished(async () => {
    await manager.stop();
    await manager.wait();
    await client.close();
  });
  return { manager, counter, calls };
}

const parent = (
  ns: string,
  name: string,
  data: Record<string, string>,
  labels: Record<string, string> = {},
): string =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: ns, labels: { role: 'parent', ...labels } },
    data,
  });

async function childData(ns: string, name: string): Promise<Record<string, string> | undefined> {
  const res = await kubectl(['get', 'secret', `${name}-child`, '-n', ns, '-o', 'json'], { kubeconfig });
  if (res.code !== 0) return undefined;
  const data = (JSON.parse(res.stdout) as { data?: Record<string, string> }).data ?? {};
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
}

const writesOtherThanLeases = (c: RequestCounter): string[] =>
  c
    .requests()
    .filter(
      (r) =>
        !r.dryRun &&
        !['get', 'list', 'watch'].includes(r.verb) &&
        r.resource !== 'leases.coordination.k8s.io',
    )
    .map((r) => `${r.verb} ${r.resource}`);

describe('runtime manager', () => {
  it('creates owned objects, recreates a deleted one, reverts drift, and a resync writes nothing', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-mgr');
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: parent(ns, 'p1', { a: '1' }) });
    const h = await startManager(ns, { syncPeriodMs: 1500 });
    await eventually(() => expect(h.manager.isLeader()).toBe(true));
    await eventually(async () => expect(await childData(ns, 'p1')).toEqual({ a: '1' }));

    // The spec changes: the child follows.
    await kubectlOk(['patch', 'configmap', 'p1', '-n', ns, '--type=merge', '-p', '{"data":{"a":"2"}}'], {
      kubeconfig,
    });
    await eventually(async () => expect(await childData(ns, 'p1')).toEqual({ a: '2' }));

    // Deleted: recreated through the owner reference.
    await kubectlOk(['delete', 'secret', 'p1-child', '-n', ns], { kubeconfig });
    await eventually(async () => expect(await childData(ns, 'p1')).toEqual({ a: '2' }));

    // Drift by hand: reverted.
    await kubectlOk(
      ['patch', 'secret', 'p1-child', '-n', ns, '--type=merge', '-p', '{"stringData":{"a":"hacked"}}'],
      {
        kubeconfig,
      },
    );
    await eventually(async () => expect(await childData(ns, 'p1')).toEqual({ a: '2' }));

    // Steady state: let a couple of resyncs run every key again; nothing is written.
    await eventually(async () => {
      const owner = JSON.parse(
        await kubectlOk(['get', 'secret', 'p1-child', '-n', ns, '-o', 'json'], { kubeconfig }),
      ) as KubeObject;
      expect(owner.metadata?.ownerReferences?.[0]).toMatchObject({
        kind: 'ConfigMap',
        name: 'p1',
        controller: true,
      });
      expect(h.manager.informer(Resources.secrets).get(ns, 'p1-child')?.['data']).toEqual({
        a: Buffer.from('2').toString('base64'),
      });
    });
    await h.manager.events.flush();
    h.counter.reset();
    const before = h.calls.length;
    await eventually(() => expect(h.calls.length).toBeGreaterThanOrEqual(before + 2), { timeoutMs: 10_000 });
    expect(writesOtherThanLeases(h.counter)).toEqual([]);
    expect(h.counter.snapshot().byVerb).not.toHaveProperty('apply');

    // The Event for the creation is there.
    const events = await kubectlOk(
      ['get', 'events', '-n', ns, '--field-selector', 'reason=Created', '-o', 'name'],
      { kubeconfig },
    );
    expect(events.trim()).not.toBe('');
  });

  it('retries an error with backoff until it succeeds; a TerminalError is not retried', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-mgr');
    const failures = new Map([['flaky', 3]]);
    const h = await startManager(ns, { failures });
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: parent(ns, 'flaky', { a: '1' }) });
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: parent(ns, 'bad', {}, { invalid: 'true' }) });
    await eventually(async () => expect(await childData(ns, 'flaky')).toEqual({ a: '1' }));
    // Three failures, the success, and the pass the child's creation triggers.
    expect(h.calls.filter((c) => c === 'flaky').length).toBeGreaterThanOrEqual(4);
    // Something else happens afterwards; bad is still only tried once.
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: parent(ns, 'later', {}) });
    await eventually(async () => expect(await childData(ns, 'later')).toEqual({}));
    expect(h.calls.filter((c) => c === 'bad')).toHaveLength(1);

    const metrics = await (await fetch(`http://127.0.0.1:${h.manager.address()?.port}/metrics`)).text();
    expect(metrics).toContain('controller_runtime_reconcile_errors_total{controller="parent"} 4');
    expect(metrics).toContain('controller_runtime_terminal_reconcile_errors_total{controller="parent"} 1');
    expect(metrics).toContain('workqueue_retries_total{name="parent"} 3');
    expect(metrics).toMatch(/workqueue_depth\{name="parent"\} 0/);
    expect(metrics).toMatch(/cacheroute_api_writes_total\{verb="apply",resource="secrets"\} [1-9]/);
    expect(metrics).toContain('leader_election_master_status{name="rt-manager"} 1');
    expect(metrics).toContain('workqueue_longest_running_processor_seconds{name="parent"} 0');
  });

  it('serves /healthz and /readyz', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-mgr');
    const h = await startManager(ns);
    const base = `http://127.0.0.1:${h.manager.address()?.port}`;
    await eventually(async () => expect((await fetch(`${base}/readyz`)).status).toBe(200));
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${base}/readyz`)).text()).toContain('[+]informers-synced ok');
    await h.manager.stop();
    await expect(fetch(`${base}/readyz`)).rejects.toThrow();
  });

  it('stops when it loses its lease, and says so', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-mgr');
    const h = await startManager(ns, { leaseMs: 2000 });
    await eventually(() => expect(h.manager.isLeader()).toBe(true));
    // Someone takes the lease by force (no resourceVersion: it cannot conflict).
    await kubectlOk(
      [
        'patch',
        'lease',
        'rt-manager',
        '-n',
        ns,
        '--type=merge',
        '-p',
        '{"spec":{"holderIdentity":"intruder"}}',
      ],
      {
        kubeconfig,
      },
    );
    expect(await h.manager.wait()).toEqual({ reason: 'leadership-lost' });
    expect(h.manager.isLeader()).toBe(false);
  });

  it('of two managers only the leader reconciles; a clean stop releases the lease and loses no reconcile', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-mgr');
    // Longer than the wait for b below: b can lead in time only if a released the lease.
    const a = await startManager(ns, { identity: 'a', leaseMs: 60_000 });
    await eventually(() => expect(a.manager.isLeader()).toBe(true));
    const b = await startManager(ns, { identity: 'b', leaseMs: 60_000 });
    const bReady = `http://127.0.0.1:${b.manager.address()?.port}/readyz`;
    // The standby is ready (synced, standing by) but does not reconcile.
    await eventually(async () => expect((await fetch(bReady)).status).toBe(200));
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: parent(ns, 'one', { a: '1' }) });
    await eventually(async () => expect(await childData(ns, 'one')).toEqual({ a: '1' }));
    expect(a.calls).toContain('one');
    expect(b.calls).toEqual([]);
    expect(b.manager.isLeader()).toBe(false);

    // Hand over, with a change landing in between.
    const history = await recordLeaseHistory(kubeconfig, ns, 'rt-manager');
    const stopped = a.manager.stop();
    await kubectlOk(['create', '-f', '-'], { kubeconfig, input: parent(ns, 'two', { b: '2' }) });
    await stopped;
    await eventually(() => expect(b.manager.isLeader()).toBe(true), { intervalMs: 20 });
    expectTakenAfterRelease(history, 'a', 'b');
    await eventually(async () => expect(await childData(ns, 'two')).toEqual({ b: '2' }));
    expect(b.calls).toEqual(expect.arrayContaining(['one', 'two']));
  });
});
