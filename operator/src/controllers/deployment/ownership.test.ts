import { describe, expect, it } from 'vitest';
import type { KubeObject } from '#kube/objects.ts';
import { Resources, type ResourceType } from '#kube/resources.ts';
import { checkOwnership, memoizeReads } from './ownership.ts';

const ROOT_UID = 'root-uid';
const ref = (apiVersion: string, kind: string, name: string, uid: string) => ({
  apiVersion,
  kind,
  name,
  uid,
  controller: true,
});
const obj = (name: string, uid: string, owner?: ReturnType<typeof ref>): KubeObject => ({
  metadata: { name, namespace: 'ns', uid, ...(owner ? { ownerReferences: [owner] } : {}) },
});

const workload = obj(
  'llama-sglang',
  'w-uid',
  ref('cacheroute.dev/v1alpha1', 'Deployment', 'llama', ROOT_UID),
);
const replicaSet = obj('llama-sglang-abc', 'rs-uid', ref('apps/v1', 'Deployment', 'llama-sglang', 'w-uid'));
const lws = obj('llama-group', 'lws-uid', ref('cacheroute.dev/v1alpha1', 'Deployment', 'llama', ROOT_UID));
const sts = obj(
  'llama-group',
  'sts-uid',
  ref('leaderworkerset.x-k8s.io/v1', 'LeaderWorkerSet', 'llama-group', 'lws-uid'),
);

function reader(objects: [ResourceType, KubeObject][]) {
  return (rt: ResourceType, _ns: string, name: string) =>
    Promise.resolve(objects.find(([r, o]) => r === rt && o.metadata?.name === name)?.[1]);
}
const cluster = reader([
  [Resources.deployments, workload],
  [Resources.replicaSets, replicaSet],
  [Resources.leaderWorkerSets, lws],
  [Resources.statefulSets, sts],
]);

describe('checkOwnership', () => {
  it('owns a pod of a ReplicaSet of its workload, and a leader of its LeaderWorkerSet', async () => {
    const pod = obj('p', 'p-uid', ref('apps/v1', 'ReplicaSet', 'llama-sglang-abc', 'rs-uid'));
    expect(await checkOwnership(pod, ROOT_UID, cluster)).toEqual({ owned: true });
    const leader = obj('l', 'l-uid', ref('apps/v1', 'StatefulSet', 'llama-group', 'sts-uid'));
    expect(await checkOwnership(leader, ROOT_UID, cluster)).toEqual({ owned: true });
    // A worker: its StatefulSet is the leader pod's, whose chain is the leader's.
    const workers = obj('llama-group-0', 'wsts-uid', ref('v1', 'Pod', 'l', 'l-uid'));
    const worker = obj('w', 'w-uid', ref('apps/v1', 'StatefulSet', 'llama-group-0', 'wsts-uid'));
    const withGroup = reader([
      [Resources.statefulSets, workers],
      [Resources.pods, leader],
      [Resources.statefulSets, sts],
      [Resources.leaderWorkerSets, lws],
    ]);
    expect(await checkOwnership(worker, ROOT_UID, withGroup)).toEqual({ owned: true });
  });

  it('refuses a labelled pod without a controller', async () => {
    expect(await checkOwnership(obj('p', 'p-uid'), ROOT_UID, cluster)).toEqual({
      owned: false,
      reason: 'Pod p has no controller',
    });
  });

  it('refuses a controller named by name with another uid (one deleted and made again, or forged)', async () => {
    const pod = obj('p', 'p-uid', ref('apps/v1', 'ReplicaSet', 'llama-sglang-abc', 'other'));
    const r = await checkOwnership(pod, ROOT_UID, cluster);
    expect(r).toEqual({ owned: false, reason: expect.stringContaining('has another uid') });
  });

  it('refuses a chain that ends at another Deployment, or names the Deployment from a pod directly', async () => {
    const other = obj('x', 'x-uid', ref('apps/v1', 'ReplicaSet', 'llama-sglang-abc', 'rs-uid'));
    expect(await checkOwnership(other, 'another-root', cluster)).toMatchObject({ owned: false });
    const direct = obj('p', 'p-uid', ref('cacheroute.dev/v1alpha1', 'Deployment', 'llama', ROOT_UID));
    expect(await checkOwnership(direct, ROOT_UID, cluster)).toEqual({
      owned: false,
      reason: expect.stringContaining('applies no Pod'),
    });
  });

  it('refuses controllers of other kinds, missing ones and chains longer than a workload’s', async () => {
    const job = obj('p', 'p-uid', ref('batch/v1', 'Job', 'j', 'j-uid'));
    expect(await checkOwnership(job, ROOT_UID, cluster)).toMatchObject({ owned: false });
    const gone = obj('p', 'p-uid', ref('apps/v1', 'ReplicaSet', 'missing', 'm-uid'));
    expect(await checkOwnership(gone, ROOT_UID, cluster)).toEqual({
      owned: false,
      reason: expect.stringContaining('does not exist'),
    });
    const rsOfRs = obj('rs2', 'rs2-uid', ref('apps/v1', 'ReplicaSet', 'llama-sglang-abc', 'rs-uid'));
    const deep = obj('p', 'p-uid', ref('apps/v1', 'ReplicaSet', 'rs2', 'rs2-uid'));
    const read = reader([
      [Resources.replicaSets, rsOfRs],
      [Resources.replicaSets, replicaSet],
      [Resources.deployments, workload],
    ]);
    expect(await checkOwnership(deep, ROOT_UID, read)).toMatchObject({ owned: false });
  });
});

describe('memoizeReads', () => {
  it('reads each object once a pass, and cached kinds from their cache', async () => {
    const reads: string[] = [];
    const read = memoizeReads(
      (rt, _ns, name) => {
        reads.push(`${rt.resource}/${name}`);
        return Promise.resolve(replicaSet);
      },
      [{ resource: Resources.deployments, get: () => workload }],
    );
    await Promise.all([read(Resources.replicaSets, 'ns', 'a'), read(Resources.replicaSets, 'ns', 'a')]);
    expect(await read(Resources.deployments, 'ns', 'llama-sglang')).toBe(workload);
    expect(reads).toEqual(['replicasets/a']);
  });
});
