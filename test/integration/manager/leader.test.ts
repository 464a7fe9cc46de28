// Leader election on a real Lease: one of two candidates leads; after a crash (stopped
// without releasing) the other takes over once the lease has expired, not before; after
// a clean release it takes over without waiting for expiry. Both read from the records
// the Lease went through, not timed on the test's clock.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { KubeClient } from '#kube/client.ts';
import { LeaderElector } from '../../../operator/src/manager/leader.ts';
import type { Lease } from '../../../operator/src/manager/leader.ts';
import { Resources } from '#kube/resources.ts';
import { createTestNamespace, eventually } from '../../support/kubectl.ts';
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

function candidate(ns: string, identity: string, leaseDurationMs: number) {
  const log: string[] = [];
  const elector = new LeaderElector({
    client,
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
});
