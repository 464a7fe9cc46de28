// Leader election on a real Lease: one of two candidates leads; after a crash (stopped
// without releasing) the other takes over once the lease has expired, not before; after
// a clean release it takes over without waiting for expiry. Both read from the records
// the Lease went through, not timed on the test's clock.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { KubeClient } from '#kube/client.ts';
import { LeaderElector } from '../../../operator/src/manager/leader.ts';
import type { Lease, LeaderElectionOptions } from '../../../operator/src/manager/leader.ts';
import { Resources } from '#kube/resources.ts';
import { createTestNamespace, eventually } from '../../support/kubectl.ts';
import { ManualClock } from '../../support/manual-clock.ts';
import { formatMicroTime } from '#kube/time.ts';
import {
  expectTakenAfterExpiry,
  expectTakenAfterRelease,
  recordLeaseHistory,
} from '../../support/lease-history.ts';

const kubeconfig = inject('kubeconfig');
let client: KubeClient;
beforeAll(async () => {
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  client = await KubeClient.fromKubeConfig(kc);
});
afterAll(async () => client.close());

function candidate(
  ns: string,
  identity: string,
  leaseDurationMs: number,
  overrides: Partial<Pick<LeaderElectionOptions, 'client' | 'clock' | 'rng'>> = {},
) {
  const log: string[] = [];
  const elector = new LeaderElector({
    client,
    ...overrides,
    namespace: ns,
    name: 'cacheroute-operator',
    identity,
    leaseDurationMs,
    renewDeadlineMs: leaseDurationMs - 500,
    retryPeriodMs: 200,
    onStartedLeading: () => log.push('started'),
    onStoppedLeading: (why) => log.push(`stopped:${why}`),
  });
  onTestFinished(() => elector.stop({ release: false }));
  return { elector, log };
}

const holder = async (ns: string): Promise<string | undefined> =>
  (await client.get<Lease>(Resources.leases, ns, 'cacheroute-operator'))?.spec?.holderIdentity;

describe('runtime leader election', () => {
  it('one leads; after a crash the other takes over once the lease has expired', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-lease');
    const leaseMs = 2000;
    const a = candidate(ns, 'a', leaseMs);
    a.elector.start();
    await eventually(() => expect(a.elector.isLeader()).toBe(true));
    const b = candidate(ns, 'b', leaseMs);
    b.elector.start();
    // b has seen a's lease and waits: a keeps renewing it.
    await eventually(() => expect(b.elector.leader()).toBe('a'));
    const renewedBefore = (await client.get<Lease>(Resources.leases, ns, 'cacheroute-operator'))?.spec
      ?.renewTime;
    await eventually(async () =>
      expect(
        (await client.get<Lease>(Resources.leases, ns, 'cacheroute-operator'))?.spec?.renewTime,
      ).not.toBe(renewedBefore),
    );
    expect(b.elector.isLeader()).toBe(false);
    expect(a.log).toEqual(['started']);

    // Crash: a stops renewing and does not release.
    const history = await recordLeaseHistory(kubeconfig, ns, 'cacheroute-operator');
    await a.elector.stop({ release: false });
    await eventually(() => expect(b.elector.isLeader()).toBe(true), { intervalMs: 20 });
    expect(await holder(ns)).toBe('b');
    expectTakenAfterExpiry(history, 'a', 'b');
    expect(b.log).toEqual(['started']);
  });

  it('after a clean release the other takes over without waiting for expiry', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-lease');
    // Longer than the wait below: b can lead in time only if a released the lease.
    const leaseMs = 60_000;
    const a = candidate(ns, 'a', leaseMs);
    a.elector.start();
    await eventually(() => expect(a.elector.isLeader()).toBe(true));
    const b = candidate(ns, 'b', leaseMs);
    b.elector.start();
    await eventually(() => expect(b.elector.leader()).toBe('a'));

    const history = await recordLeaseHistory(kubeconfig, ns, 'cacheroute-operator');
    await a.elector.stop({ release: true });
    expect(a.log).toEqual(['started', 'stopped:released']);
    await eventually(() => expect(b.elector.isLeader()).toBe(true), { intervalMs: 20 });
    expect(await holder(ns)).toBe('b');
    expectTakenAfterRelease(history, 'a', 'b');
  });

  it('a leader that cannot renew steps down after the renew deadline', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-lease');
    const a = candidate(ns, 'a', 2000);
    a.elector.start();
    await eventually(() => expect(a.elector.isLeader()).toBe(true));
    // Someone else takes the lease by force (as an operator's manual takeover would).
    await client.patch(
      Resources.leases,
      ns,
      'cacheroute-operator',
      { spec: { holderIdentity: 'intruder' } },
      'merge',
    );
    await eventually(() => expect(a.log).toEqual(['started', 'stopped:lost']));
    expect(a.elector.isLeader()).toBe(false);
  });

  // The candidate reads its clock, then the lease; a renewal that lands between the two
  // must count from when the candidate saw it, or it takes the lease up to one read early.
  // The interleaving is forced: b's read first lets a renew (b's clock moves on meanwhile).
  it("a renewal that lands during the candidate's read counts from when it was read", async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-lease');
    const leaseMs = 2000;
    const inFlightMs = 500;
    const clock = new ManualClock();
    clock.advance(Date.now());
    await client.create<Lease>(Resources.leases, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'cacheroute-operator', namespace: ns },
      spec: {
        holderIdentity: 'a',
        leaseDurationSeconds: leaseMs / 1000,
        acquireTime: formatMicroTime(clock.now()),
        renewTime: formatMicroTime(clock.now()),
        leaseTransitions: 0,
      },
    });
    const history = await recordLeaseHistory(kubeconfig, ns, 'cacheroute-operator');
    let reads = 0;
    const renewingDuringFirstRead = new Proxy(client, {
      get(target, prop, receiver) {
        if (prop === 'get')
          return async (...args: Parameters<KubeClient['get']>) => {
            if (reads++ === 0) {
              const lease = await target.get<Lease>(...args);
              if (!lease) throw new Error('the lease the test created is gone');
              clock.advance(inFlightMs);
              await client.replace<Lease>(Resources.leases, {
                ...lease,
                spec: { ...lease.spec, renewTime: formatMicroTime(clock.now()) },
              });
            }
            return target.get(...args);
          };
        const value: unknown = Reflect.get(target, prop, receiver);
        return typeof value === 'function'
          ? (value as (this: KubeClient, ...args: unknown[]) => unknown).bind(target)
          : value;
      },
    });
    const b = candidate(ns, 'b', leaseMs, { client: renewingDuringFirstRead, clock, rng: () => 0 }).elector;
    b.start();
    // A try has finished once b sleeps on the clock again: each step lets one finish first.
    const untilAsleep = () => eventually(() => expect(clock.pendingTimers).toBe(1), { intervalMs: 5 });
    while (!b.isLeader()) {
      await untilAsleep();
      clock.advance(100);
    }
    await untilAsleep();
    expect(reads).toBeGreaterThan(1);
    expectTakenAfterExpiry(history, 'a', 'b');
  });
});
