// The watcher's own behaviour (readiness, coalescing, atomic swap) over an
// in-memory list/watch source; the real API server is in
// test/integration/gateway/discovery.test.ts.

import { afterEach, describe, expect, it } from 'vitest';
import type { KubeObject } from '#kube/objects.ts';
import { loadSample } from '../../../test/support/samples.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { eventually } from '../../../test/support/gateway/fake-upstream.ts';
import { MemoryApi } from '../../../test/support/gateway/memory-api.ts';
import { computeRoutableEndpoints, type ModelRoute } from '../routing/table.ts';
import { DiscoveryWatcher } from './watcher.ts';

const deployment = (ns: string, name: string, verified = true): KubeObject => {
  const doc = loadSample('deployment-dense.yaml') as unknown as KubeObject & { spec: { model: object } };
  doc.metadata = { name, namespace: ns, creationTimestamp: '2026-01-01T00:00:00Z' };
  doc.spec.model = { ...doc.spec.model, servedName: name };
  doc['status'] = {
    identity: { deploymentId: 'llama-3-1-8b-instruct-r1', fingerprint: 'fp1' },
    endpoints: [
      { pod: `${name}-0`, ip: '10.244.0.5', port: 30000, role: 'standalone', ready: true, verified },
    ],
    routable: verified
      ? { value: true, reason: 'VerifiedEndpoints' }
      : { value: false, reason: 'NoVerifiedEndpoints' },
  };
  return doc;
};

const DEPLOYMENTS = 'deployments';
let watcher: DiscoveryWatcher | undefined;
afterEach(async () => {
  await watcher?.stop();
  watcher = undefined;
});

function start(api: MemoryApi, clock: ManualClock, namespaces?: string[]): DiscoveryWatcher {
  watcher = new DiscoveryWatcher({
    client: api,
    clock,
    coalesceMs: 100,
    ...(namespaces ? { namespaces } : {}),
  });
  watcher.start();
  return watcher;
}

const models = (w: DiscoveryWatcher) => w.table.list().map((r) => r.model);

describe('DiscoveryWatcher', () => {
  it('is not ready until every informer has listed, then serves the listed state', async () => {
    const api = new MemoryApi();
    api.put(DEPLOYMENTS, deployment('a', 'm1'));
    const w = start(api, new ManualClock());
    await eventually(() => api.listed.length === 2);
    expect(w.table.ready).toBe(false);
    expect(w.table.list()).toEqual([]);
    api.gate.open();
    await eventually(() => w.table.ready);
    expect(models(w)).toEqual(['m1']);
    expect(w.rebuilds).toBe(1);
  });

  it('coalesces a burst of changes into one rebuild, after the delay', async () => {
    const api = new MemoryApi();
    api.gate.open();
    const clock = new ManualClock();
    const w = start(api, clock);
    await eventually(() => w.table.ready);
    api.put(DEPLOYMENTS, deployment('a', 'm1'));
    api.put(DEPLOYMENTS, deployment('a', 'm2'));
    api.put(DEPLOYMENTS, deployment('b', 'm3'));
    await eventually(() => w.cached.deployments === 3);
    expect(clock.pendingTimers).toBe(1);
    expect(models(w)).toEqual([]);
    clock.advance(100);
    expect(models(w)).toEqual(['m1', 'm2', 'm3']);
    expect(w.rebuilds).toBe(2);
  });

  it('swaps whole routes: an unchanged model keeps its object, a changed one gets a new one', async () => {
    const api = new MemoryApi();
    api.put(DEPLOYMENTS, deployment('a', 'm1'));
    api.put(DEPLOYMENTS, deployment('a', 'm2'));
    api.gate.open();
    const clock = new ManualClock();
    const w = start(api, clock);
    await eventually(() => w.table.ready);
    const [m1, m2] = w.table.list();
    api.put(DEPLOYMENTS, deployment('a', 'm1')); // a new resourceVersion, the same content
    api.put(DEPLOYMENTS, deployment('a', 'm2', false)); // its endpoint lost verification
    await eventually(() => api.delivered === 2);
    clock.advance(100);
    expect(w.table.lookup('m1')).toBe(m1);
    expect(w.table.lookup('m2')).not.toBe(m2);
    expect(w.table.lookup('m2')?.endpoints).toEqual([]);
    expect(m2?.endpoints).toHaveLength(1); // a request holding the old route keeps its endpoint
    expect(w.issues).toEqual([expect.objectContaining({ code: 'NotRoutable', model: 'm2' })]);
  });

  it('removes a deleted Deployment', async () => {
    const api = new MemoryApi();
    api.put(DEPLOYMENTS, deployment('a', 'm1'));
    api.gate.open();
    const clock = new ManualClock();
    const w = start(api, clock);
    await eventually(() => w.table.ready);
    api.remove(DEPLOYMENTS, 'a', 'm1');
    await eventually(() => clock.pendingTimers === 1);
    clock.advance(100);
    expect(models(w)).toEqual([]);
  });

  it('watches only the listed namespaces', async () => {
    const api = new MemoryApi();
    api.put(DEPLOYMENTS, deployment('a', 'm1'));
    api.put(DEPLOYMENTS, deployment('b', 'm2'));
    api.put(DEPLOYMENTS, deployment('c', 'm3'));
    api.gate.open();
    const w = start(api, new ManualClock(), ['a', 'c', 'a']);
    await eventually(() => w.table.ready);
    expect(models(w)).toEqual(['m1', 'm3']);
    expect(api.listed.sort()).toEqual(['a', 'a', 'c', 'c']);
  });

  // The bug this guards: a held endpoint stayed held forever when nothing in the cluster
  // changed, because the table was rebuilt only on object changes.
  it('routes to a held endpoint once its warm-up wait is over, with no object changing', async () => {
    const api = new MemoryApi();
    const d = deployment('a', 'm1');
    const status = d['status'] as { endpoints: Record<string, unknown>[] };
    status.endpoints = ['warm', 'cold'].map((pod, i) => ({
      pod,
      ip: `10.244.0.${i + 5}`,
      port: 30000,
      role: 'standalone',
      ready: true,
      verified: true,
      restartCount: 0,
    }));
    api.put(DEPLOYMENTS, d);
    const policy = loadSample('cachepolicy.yaml') as unknown as KubeObject & {
      spec: Record<string, unknown>;
    };
    policy.metadata = { name: 'p', namespace: 'a', creationTimestamp: '2026-01-01T00:00:00Z' };
    policy.spec['targetRefs'] = [{ kind: 'Deployment', name: 'm1' }];
    const since = '2026-12-01T10:00:00Z';
    policy['status'] = {
      targets: [
        {
          name: 'm1',
          accepted: true,
          reason: 'Accepted',
          cacheSalt: 's',
          warmup: [
            { pod: 'warm', restartCount: 0, state: 'Warmed', since, warmedAt: since },
            { pod: 'cold', restartCount: 0, state: 'Warming', since },
          ],
        },
      ],
    };
    api.put('cachepolicies', policy);
    api.gate.open();
    const clock = new ManualClock();
    let wall = Date.parse(since) + 100_000;
    watcher = new DiscoveryWatcher({ client: api, clock, coalesceMs: 100, wallClock: () => wall });
    watcher.start();
    const w = watcher;
    await eventually(() => w.table.ready);
    const routable = () => computeRoutableEndpoints(w.table.lookup('m1') as ModelRoute).map((e) => e.id);
    expect(routable()).toEqual(['a/warm']);
    wall += 20_000;
    clock.advance(20_050);
    expect(routable()).toEqual(['a/warm', 'a/cold']);
    expect(w.table.lookup('m1')?.endpoints[1]?.warmup?.state).toBe('timed-out');
  });
});
