// InferencePools from the operator (issue 32 item 2), against a real API server with the garbage
// collector, ReplicaSet and Deployment controllers (a plane of this file's own: it starts without
// GIE's CRDs, which the shared plane may hold). Started with the picker Service, the operator
// warns on each Deployment while InferencePools are not served and keeps running; once the
// pinned CRDs are installed it makes one pool per Deployment, without a restart: its selector
// picks, by the API server's own label selection, exactly that Deployment's pods, never another
// Deployment's; its endpointPickerRef names the picker; failureMode follows the governing
// CachePolicy; the pool goes with its Deployment.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createLogger } from '#kube/logger.ts';
import { startOperator } from '../../../operator/src/operator.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../../support/controlplane.ts';
import { installGieCrds } from '../../support/gie.ts';
import { createTestNamespace, eventually, kubectlOk, listEvents } from '../../support/kubectl.ts';
import { REPO_ROOT } from '../../support/samples.ts';

let cp: ControlPlane;
beforeAll(async () => {
  cp = await startControlPlane({
    full: true,
    controllers: ['deployment', 'replicaset', 'garbagecollector', 'endpointslice'],
  });
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], {
    kubeconfig: cp.kubeconfig,
  });
}, 300_000);
afterAll(() => cp?.stop());

interface Pool {
  metadata: { name: string; ownerReferences?: { kind: string; name: string; uid: string }[] };
  spec: {
    selector: { matchLabels: Record<string, string> };
    targetPorts: { number: number }[];
    endpointPickerRef: { name: string; port: { number: number }; failureMode: string };
  };
}

const k = () => ({ kubeconfig: cp.kubeconfig });

async function pool(ns: string, name: string): Promise<Pool | undefined> {
  const out = await kubectlOk(
    ['get', 'inferencepools', '-n', ns, '-o', 'json', '--ignore-not-found', name],
    k(),
  );
  return out.trim() === '' ? undefined : (JSON.parse(out) as Pool);
}

async function podNames(ns: string, selector: string): Promise<string[]> {
  const out = await kubectlOk(['get', 'pods', '-n', ns, '-l', selector, '-o', 'name'], k());
  return out
    .split('\n')
    .filter((l) => l !== '')
    .sort();
}

const asSelector = (labels: Record<string, string>): string =>
  Object.entries(labels)
    .map(([key, v]) => `${key}=${v}`)
    .join(',');

async function apply(ns: string, manifest: object): Promise<void> {
  await kubectlOk(['apply', '-n', ns, '-f', '-'], { ...k(), input: JSON.stringify(manifest) });
}

describe('InferencePool per Deployment', () => {
  it('absent CRD: a Warning and no crash; installed: an exact pool, kept, updated, deleted with its owner', async () => {
    const ns = await createTestNamespace(cp.kubeconfig, 'pool');
    const op = await startOperator({
      kubeconfig: cp.kubeconfig,
      namespaces: [ns],
      logger: createLogger({ level: 'error', fields: { component: 'operator' } }),
      leaderElection: false,
      http: false,
      picker: { namespace: ns, name: 'cacheroute-picker', port: 9002 },
      inferencePoolRecheckMs: 500,
    });
    onTestFinished(() => op.stop());

    await apply(ns, buildDeploymentManifest({ name: 'llama-8b', replicas: 2 }));
    await apply(ns, buildDeploymentManifest({ name: 'other', replicas: 1 }));
    await eventually(
      async () => {
        const events = await listEvents(cp.kubeconfig, ns, 'llama-8b');
        expect(events).toContainEqual(
          expect.objectContaining({ type: 'Warning', reason: 'InferencePoolCrdMissing' }),
        );
      },
      { timeoutMs: 60_000 },
    );
    // Still running and still reconciling: the Deployment's own workloads were made meanwhile.
    await eventually(
      async () => expect(await podNames(ns, 'cacheroute.dev/deployment=llama-8b')).toHaveLength(2),
      {
        timeoutMs: 60_000,
      },
    );

    await installGieCrds(cp.kubeconfig);
    const made = await eventually(
      async () => {
        const p = await pool(ns, 'llama-8b');
        expect(p).toBeDefined();
        return p as Pool;
      },
      { timeoutMs: 60_000 },
    );
    const uid = await kubectlOk(
      ['get', 'deployments.cacheroute.dev', 'llama-8b', '-n', ns, '-o', 'jsonpath={.metadata.uid}'],
      k(),
    );
    expect(made.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Deployment', name: 'llama-8b', uid }),
    ]);
    expect(made.spec.targetPorts).toEqual([{ number: 30000 }]);
    expect(made.spec.endpointPickerRef).toMatchObject({
      name: 'cacheroute-picker',
      port: { number: 9002 },
      failureMode: 'FailClose',
    });

    // Exact: the pods the API server selects for the pool are the pods of llama-8b's ReplicaSet.
    const selected = await podNames(ns, asSelector(made.spec.selector.matchLabels));
    const rsOwned = JSON.parse(await kubectlOk(['get', 'pods', '-n', ns, '-o', 'json'], k())) as {
      items: { metadata: { name: string; ownerReferences?: { name: string }[] } }[];
    };
    const ownPods = rsOwned.items
      .filter((p) => p.metadata.ownerReferences?.some((o) => o.name.startsWith('llama-8b-sglang-')))
      .map((p) => `pod/${p.metadata.name}`)
      .sort();
    expect(ownPods).toHaveLength(2);
    expect(selected).toEqual(ownPods);
    const otherPool = await eventually(async () => {
      const p = await pool(ns, 'other');
      expect(p).toBeDefined();
      return p as Pool;
    });
    const otherSelected = await podNames(ns, asSelector(otherPool.spec.selector.matchLabels));
    expect(otherSelected).toHaveLength(1);
    expect(otherSelected.some((p) => selected.includes(p))).toBe(false);

    // The governing CachePolicy's failureMode reaches the pool.
    await apply(
      ns,
      buildCachePolicyManifest('team-a', ['llama-8b'], {
        inferencePool: { failureMode: 'FailOpen' },
        tenancy: { sharePrefixes: true },
      }),
    );
    await eventually(async () =>
      expect((await pool(ns, 'llama-8b'))?.spec.endpointPickerRef.failureMode).toBe('FailOpen'),
    );
    expect((await pool(ns, 'other'))?.spec.endpointPickerRef.failureMode).toBe('FailClose');

    // Gone with its Deployment (the garbage collector, by the owner reference); the other stays.
    await kubectlOk(['delete', 'deployments.cacheroute.dev', 'llama-8b', '-n', ns, '--wait=false'], k());
    await eventually(async () => expect(await pool(ns, 'llama-8b')).toBeUndefined(), { timeoutMs: 60_000 });
    expect(await pool(ns, 'other')).toBeDefined();
  });

  it('a Deployment in a team namespace: its pool there, naming a mirror of the picker Service', async () => {
    const pickerNs = await createTestNamespace(cp.kubeconfig, 'pool-release');
    const team = await createTestNamespace(cp.kubeconfig, 'pool-team');
    const taken = await createTestNamespace(cp.kubeconfig, 'pool-taken');
    await installGieCrds(cp.kubeconfig);
    // The chart's picker Service and the EndpointSlice the endpointslice controller keeps for it
    // (this plane runs no kubelet, so the picker pods' addresses are written as it would).
    await apply(pickerNs, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'cacheroute-picker' },
      spec: {
        ports: [
          { name: 'grpc', port: 9002, targetPort: 'grpc', appProtocol: 'kubernetes.io/h2c' },
          { name: 'grpc-health', port: 9003, targetPort: 'grpc-health', appProtocol: 'kubernetes.io/h2c' },
        ],
      },
    });
    const pickerSlice = (endpoints: object[]) => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'cacheroute-picker-abcde',
        labels: {
          'kubernetes.io/service-name': 'cacheroute-picker',
          'endpointslice.kubernetes.io/managed-by': 'test.cacheroute.dev',
        },
      },
      addressType: 'IPv4',
      endpoints,
      ports: [
        { name: 'grpc', port: 9002, protocol: 'TCP', appProtocol: 'kubernetes.io/h2c' },
        { name: 'grpc-health', port: 9003, protocol: 'TCP', appProtocol: 'kubernetes.io/h2c' },
      ],
    });
    await apply(pickerNs, pickerSlice([{ addresses: ['10.1.0.5'], conditions: { ready: true } }]));
    // Someone's own Service of the picker's name: not the operator's to overwrite.
    await apply(taken, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'cacheroute-picker' },
      spec: { ports: [{ port: 80 }] },
    });
    // Namespaced, as a platform team runs it: the picker's namespace is not one it watches.
    const op = await startOperator({
      kubeconfig: cp.kubeconfig,
      namespaces: [team, taken],
      logger: createLogger({ level: 'error', fields: { component: 'operator' } }),
      leaderElection: false,
      http: false,
      picker: { namespace: pickerNs, name: 'cacheroute-picker', port: 9002 },
    });
    onTestFinished(() => op.stop());
    await apply(team, buildDeploymentManifest({ name: 'llama-8b', replicas: 1 }));
    await apply(team, buildDeploymentManifest({ name: 'qwen', replicas: 1 }));
    await apply(taken, buildDeploymentManifest({ name: 'llama-8b', replicas: 1 }));

    await eventually(async () => {
      const p = await pool(team, 'llama-8b');
      expect(p?.spec.endpointPickerRef).toMatchObject({ name: 'cacheroute-picker', port: { number: 9002 } });
    });
    const get = async <T>(kind: string, ns: string, name: string): Promise<T> =>
      JSON.parse(await kubectlOk(['get', kind, '-n', ns, name, '-o', 'json'], k())) as T;
    interface Svc {
      metadata: { ownerReferences?: { name: string; controller?: boolean }[] };
      spec: { selector?: object; clusterIP: string; ports: { name: string; port: number }[] };
    }
    interface Slice {
      endpoints: { addresses: string[]; conditions?: { ready?: boolean } }[] | null;
      ports: { name: string; port: number }[];
    }
    // The mirror: a ClusterIP Service of the picker's name and ports with no selector, owned by
    // both Deployments of the namespace, and an EndpointSlice of the picker's addresses.
    const svc = await get<Svc>('service', team, 'cacheroute-picker');
    expect(svc.spec.selector).toBeUndefined();
    expect(svc.spec.clusterIP).not.toBe('None');
    expect(svc.spec.ports.map((p) => `${p.name}:${p.port}`)).toEqual(['grpc:9002', 'grpc-health:9003']);
    await eventually(async () =>
      expect(
        (await get<Svc>('service', team, 'cacheroute-picker')).metadata.ownerReferences?.map((o) => o.name),
      ).toEqual(['llama-8b', 'qwen']),
    );
    const mirrored = async () => {
      const out = await kubectlOk(
        [
          'get',
          'endpointslices',
          '-n',
          team,
          '-l',
          'kubernetes.io/service-name=cacheroute-picker',
          '-o',
          'json',
        ],
        k(),
      );
      return (JSON.parse(out) as { items: Slice[] }).items;
    };
    await eventually(async () => {
      const slices = await mirrored();
      expect(slices).toHaveLength(1);
      expect(slices[0]?.endpoints).toEqual([{ addresses: ['10.1.0.5'], conditions: { ready: true } }]);
      expect(slices[0]?.ports.map((p) => `${p.name}:${p.port}`)).toEqual(['grpc:9002', 'grpc-health:9003']);
    });

    // The picker's endpoints change (a rollout): the mirror follows.
    await apply(
      pickerNs,
      pickerSlice([
        { addresses: ['10.1.0.5'], conditions: { ready: false, terminating: true } },
        { addresses: ['10.1.0.6'], conditions: { ready: true } },
      ]),
    );
    await eventually(async () =>
      expect((await mirrored())[0]?.endpoints).toEqual([
        { addresses: ['10.1.0.5'], conditions: { ready: false, terminating: true } },
        { addresses: ['10.1.0.6'], conditions: { ready: true } },
      ]),
    );

    // Where the name is taken: a Warning, no pool, and the Service left as it was.
    await eventually(async () => {
      const events = await listEvents(cp.kubeconfig, taken, 'llama-8b');
      expect(events).toContainEqual(
        expect.objectContaining({ type: 'Warning', reason: 'PickerServiceNameTaken' }),
      );
    });
    expect(await pool(taken, 'llama-8b')).toBeUndefined();
    expect((await get<Svc>('service', taken, 'cacheroute-picker')).spec.ports.map((p) => p.port)).toEqual([
      80,
    ]);

    // The last Deployment gone: pools, mirror Service and EndpointSlice go with them.
    await kubectlOk(['delete', 'deployments.cacheroute.dev', '--all', '-n', team, '--wait=false'], k());
    await eventually(
      async () => {
        expect(await pool(team, 'llama-8b')).toBeUndefined();
        expect(
          await kubectlOk(['get', 'service', '-n', team, '--ignore-not-found', 'cacheroute-picker'], k()),
        ).toBe('');
        expect(await mirrored()).toEqual([]);
      },
      { timeoutMs: 60_000 },
    );
  });
});
