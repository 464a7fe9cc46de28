// Two operators on one Lease: one leads; when the leader dies without releasing, the
// other takes over once the lease has expired (not before) and reconciles what was
// created in the gap; after a clean stop the leader releases the lease and the other
// takes it without waiting for expiry. No reconcile is lost either way. The handovers
// are read from the records the Lease went through, not timed on the test's clock.
//
// The crash: from the API server's side a dead leader is one whose requests stop.
// Closing its client does exactly that (the in-flight watches and every later request
// fail), without killing the test process: nothing is released, the Lease just stops
// being renewed. The deposed instance then fails to renew within its renew deadline and
// its manager ends with `leadership-lost`, as a partitioned leader must.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { startOperator } from '../../../operator/src/operator.ts';
import type { Operator } from '../../../operator/src/operator.ts';
import type { Lease } from '../../../operator/src/manager/leader.ts';
import { createLogger } from '#kube/logger.ts';
import { buildDeploymentManifest } from '../../support/builders.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';
import {
  expectTakenAfterExpiry,
  expectTakenAfterRelease,
  recordLeaseHistory,
} from '../../support/lease-history.ts';
import { REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const LEASE = 'cacheroute-operator';

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
});

async function startInstance(ns: string, identity: string, leaseMs: number): Promise<Operator> {
  const op = await startOperator({
    kubeconfig,
    namespaces: [ns],
    // The dying instance's errors are the point of the test, not news.
    logger: createLogger({
      level: 'error',
      fields: { component: 'operator', identity },
      write: () => undefined,
    }),
    leaderElection: {
      namespace: ns,
      name: LEASE,
      identity,
      leaseDurationMs: leaseMs,
      renewDeadlineMs: leaseMs - 500,
      retryPeriodMs: 200,
    },
    http: false,
  });
  onTestFinished(() => op.stop());
  return op;
}

async function lease(ns: string): Promise<Lease> {
  return JSON.parse(
    await kubectlOk(['get', 'lease', LEASE, '-n', ns, '-o', 'json'], { kubeconfig }),
  ) as Lease;
}

async function createDeployment(ns: string, name: string): Promise<void> {
  await kubectlOk(['apply', '-n', ns, '-f', '-'], {
    kubeconfig,
    input: JSON.stringify(buildDeploymentManifest({ name, replicas: 1 })),
  });
}

// Reconciled: the owned workload exists and the status reports the current generation.
async function expectReconciled(ns: string, name: string): Promise<void> {
  await eventually(
    async () => {
      expect(
        (await kubectl(['get', 'deployment.apps', `${name}-sglang`, '-n', ns], { kubeconfig })).code,
      ).toBe(0);
      const out = await kubectlOk(
        ['get', 'sgd', name, '-n', ns, '-o', 'jsonpath={.status.observedGeneration}'],
        {
          kubeconfig,
        },
      );
      expect(out).toBe('1');
    },
    { timeoutMs: 20_000 },
  );
}

describe('operator leader election', () => {
  it('after the leader crashes, the other takes over once the lease has expired and loses no reconcile', async () => {
    const ns = await createTestNamespace(kubeconfig, 'op-leader');
    const leaseMs = 2000;
    const [aId, bId] = [`a-${randomBytes(2).toString('hex')}`, `b-${randomBytes(2).toString('hex')}`];
    const a = await startInstance(ns, aId, leaseMs);
    await eventually(() => expect(a.manager.isLeader()).toBe(true));
    const b = await startInstance(ns, bId, leaseMs);
    await createDeployment(ns, 'before');
    await expectReconciled(ns, 'before');
    // b has had time to see a's lease renewed: it is a standby, not a second leader.
    expect(b.manager.isLeader()).toBe(false);
    const holder = (await lease(ns)).spec?.holderIdentity;
    expect(holder).toMatch(/^a-/);

    const history = await recordLeaseHistory(kubeconfig, ns, LEASE);
    await a.client.close();
    await createDeployment(ns, 'gap');
    expect(b.manager.isLeader()).toBe(false);

    await eventually(() => expect(b.manager.isLeader()).toBe(true), { intervalMs: 20, timeoutMs: 10_000 });
    expect((await lease(ns)).spec?.holderIdentity).toBe(bId);
    expectTakenAfterExpiry(history, aId, bId);
    await expectReconciled(ns, 'gap');
    // The deposed leader stepped down by itself once it could not renew.
    expect(await a.manager.wait()).toEqual({ reason: 'leadership-lost' });
    expect(a.manager.isLeader()).toBe(false);
  });

  it('after a clean stop, the other takes over without waiting for expiry and loses no reconcile', async () => {
    const ns = await createTestNamespace(kubeconfig, 'op-leader');
    // Longer than the wait for b below: b can lead in time only if a released the lease.
    const leaseMs = 60_000;
    const [aId, bId] = [`a-${randomBytes(2).toString('hex')}`, `b-${randomBytes(2).toString('hex')}`];
    const a = await startInstance(ns, aId, leaseMs);
    await eventually(() => expect(a.manager.isLeader()).toBe(true));
    const b = await startInstance(ns, bId, leaseMs);
    await createDeployment(ns, 'before');
    await expectReconciled(ns, 'before');
    expect(b.manager.isLeader()).toBe(false);

    // Created as the leader stops: either a reconciles it before releasing, or b after.
    const history = await recordLeaseHistory(kubeconfig, ns, LEASE);
    const stopping = a.stop();
    await createDeployment(ns, 'during');
    await stopping;
    expect(await a.manager.wait()).toEqual({ reason: 'stopped' });
    await eventually(() => expect(b.manager.isLeader()).toBe(true), { intervalMs: 20 });
    expect((await lease(ns)).spec?.holderIdentity).toBe(bId);
    expectTakenAfterRelease(history, aId, bId);
    await expectReconciled(ns, 'during');
    await createDeployment(ns, 'after');
    await expectReconciled(ns, 'after');
  });
});
