import { describe, expect, it } from 'vitest';
import type { KubeObject } from '#kube/objects.ts';
import {
  buildLease,
  buildLeaseName,
  mapSameFingerprint,
  planLeaseClaim,
  type LeaseObject,
} from './reconciler.ts';
import { buildTask } from '../../../../test/support/operator/task.ts';

const FP = `sha256:${'ab'.repeat(32)}`;

describe('buildLeaseName', () => {
  it('is task- and the first 40 hex digits of the fingerprint: a valid object name', () => {
    expect(buildLeaseName(FP)).toBe(`task-${'ab'.repeat(20)}`);
    expect(buildLeaseName(FP)).toMatch(/^[a-z0-9-]{1,63}$/);
  });
});

describe('buildLease', () => {
  it('names the holder and is owned (not controlled) by it', () => {
    const task = buildTask({ name: 'a', uid: 'u-a' });
    const lease = buildLease(task, FP, new Date('2026-01-01T00:00:00Z'));
    expect(lease).toMatchObject({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: buildLeaseName(FP),
        namespace: 'ns',
        ownerReferences: [{ kind: 'Task', name: 'a', uid: 'u-a' }],
      },
      spec: { holderIdentity: 'a', acquireTime: '2026-01-01T00:00:00.000000Z' },
    });
    expect(lease.metadata?.ownerReferences?.[0]?.controller).toBeUndefined();
  });
});

describe('planLeaseClaim', () => {
  const me = { name: 'b', uid: 'u-b' };
  const leaseOf = (name: string, uid: string): LeaseObject =>
    buildLease(buildTask({ name, uid }), FP, new Date(0));

  it.each<[string, LeaseObject | undefined, { uid?: string; phase?: string } | undefined, string]>([
    ['no lease: create it', undefined, undefined, 'create'],
    ['my own lease (a check retry or rework attempt)', leaseOf('b', 'u-b'), { uid: 'u-b' }, 'held'],
    ['a live holder that has not started', leaseOf('a', 'u-a'), { uid: 'u-a', phase: 'Pending' }, 'busy'],
    ['a running holder', leaseOf('a', 'u-a'), { uid: 'u-a', phase: 'Running' }, 'busy'],
    ['a holder awaiting review', leaseOf('a', 'u-a'), { uid: 'u-a', phase: 'AwaitingReview' }, 'busy'],
    ['a holder without status yet', leaseOf('a', 'u-a'), { uid: 'u-a' }, 'busy'],
    ['a deleted holder', leaseOf('a', 'u-a'), undefined, 'takeover'],
    ['a holder recreated under its name', leaseOf('a', 'u-a'), { uid: 'u-a2', phase: 'Running' }, 'takeover'],
    ['a failed holder', leaseOf('a', 'u-a'), { uid: 'u-a', phase: 'Failed' }, 'takeover'],
    [
      'a finished holder this task could not reuse',
      leaseOf('a', 'u-a'),
      { uid: 'u-a', phase: 'Succeeded' },
      'takeover',
    ],
    ['my name under an older uid', leaseOf('b', 'u-old'), undefined, 'takeover'],
  ])('%s', (_name, lease, holder, want) => {
    expect(planLeaseClaim(lease, me, holder)).toBe(want);
  });
});

describe('mapSameFingerprint', () => {
  const obj = (name: string, fingerprint?: string, namespace = 'ns'): KubeObject => ({
    metadata: { name, namespace },
    ...(fingerprint ? { status: { fingerprint } } : {}),
  });
  const all = [obj('a', 'f1'), obj('b', 'f1'), obj('c', 'f2'), obj('d'), obj('e', 'f1', 'other')];

  it('maps a task to the other tasks of its namespace with its fingerprint', () => {
    expect(mapSameFingerprint(obj('a', 'f1'), all)).toEqual([{ namespace: 'ns', name: 'b' }]);
  });
  it('maps a task without a fingerprint to nothing', () => {
    expect(mapSameFingerprint(obj('d'), all)).toEqual([]);
  });
});
