// A CachePolicy's admission bound holds for the whole gateway tier: three
// gateway replicas learn each other from their Service's EndpointSlices (on a
// real kube-apiserver) and each admits its share, so the requests in flight
// across the tier never pass the bound. When a replica drains (its endpoint
// terminating), the other two take its share at once.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { build } from '../../../gateway/src/app.ts';
import { DiscoveryWatcher } from '../../../gateway/src/discovery/watcher.ts';
import { EndpointSlicePeers } from '../../../gateway/src/discovery/peer-slices.ts';
import { KubeClient } from '#kube/client.ts';
import { startSim, type RunningSim } from '../../support/sim/testing.ts';
import { createTestNamespace, eventually, kubectlOk, patchCacherouteStatus } from '../../support/kubectl.ts';
import { loadSample, REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const CRD_DIR = join(REPO_ROOT, 'crds');
const MODEL = 'llama-8b';
const BOUND = 6;
const SERVICE = 'cacheroute-gateway';
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

beforeAll(async () => {
  await kubectlOk(['apply', '--server-side', '-f', CRD_DIR], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', CRD_DIR], { kubeconfig });
});

const apply = (ns: string, doc: unknown) =>
  kubectlOk(['apply', '-n', ns, '-f', '-'], { kubeconfig, input: JSON.stringify(doc) });

const patchStatus = (ns: string, resource: string, name: string, status: unknown) =>
  patchCacherouteStatus(kubeconfig, ns, resource, name, status);

/** The gateway Service's slice, as the EndpointSlice controller would write it. */
function slice(members: readonly { name: string; terminating?: boolean }[]) {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${SERVICE}-abcde`, labels: { 'kubernetes.io/service-name': SERVICE } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: members.map((m, i) => ({
      addresses: [`10.244.9.${i + 1}`],
      conditions: { ready: !m.terminating, serving: true, terminating: m.terminating ?? false },
      targetRef: { kind: 'Pod', name: m.name },
    })),
  };
}

async function setUp(ns: string, sim: RunningSim): Promise<void> {
  await apply(ns, loadSample('deployment-dense.yaml'));
  await patchStatus(ns, 'deployments', MODEL, {
    identity: { deploymentId: 'llama-3-1-8b-instruct-r1', fingerprint: 'fp1' },
    endpoints: [
      {
        pod: 'llama-8b-0',
        ip: '127.0.0.1',
        port: Number(new URL(sim.url).port),
        role: 'standalone',
        ready: true,
        verified: true,
        fingerprint: 'fp1',
        restartCount: 0,
      },
    ],
    routable: { value: true, reason: 'VerifiedEndpoints' },
  });
  const policy = loadSample('cachepolicy.yaml');
  policy.spec['admission'] = { maxConcurrency: BOUND, maxQueue: 60, queueTimeoutSeconds: 60 };
  policy.spec['resultReuse'] = { enabled: false };
  delete policy.spec['warmup'];
  await apply(ns, policy);
  await patchStatus(ns, 'cachepolicies', 'team-a', {
    targets: [
      {
        name: MODEL,
        accepted: true,
        reason: 'Accepted',
        deploymentId: 'llama-3-1-8b-instruct-r1',
        cacheSalt: 's',
      },
    ],
  });
  await apply(ns, {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: SERVICE },
    spec: { ports: [{ name: 'http', port: 8080 }] },
  });
}

async function startReplica(ns: string, self: string) {
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  const client = await KubeClient.fromKubeConfig(kc);
  const peers = new EndpointSlicePeers({ client, namespace: ns, service: SERVICE, self });
  const watcher = new DiscoveryWatcher({ client, namespaces: [ns], coalesceMs: 20 });
  const app = build({ table: watcher.table, peers });
  watcher.start();
  peers.start();
  cleanups.push(async () => {
    await app.close();
    await Promise.all([watcher.stop(), peers.stop()]);
    await client.close();
  });
  await peers.waitForSync();
  await eventually(async () => expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200));
  return { app, peers };
}

type Replica = Awaited<ReturnType<typeof startReplica>>;

const inFlightOf = (r: Replica): number =>
  r.app.gateway.admission.entries().reduce((n, [, ctl]) => n + ctl.snapshot().inFlight, 0);

/** `count` requests spread in turn over the replicas, all at once; the peak of the tier's in-flight sum. */
async function load(replicas: readonly Replica[], count: number) {
  let peak = 0;
  let running = true;
  const sampler = (async () => {
    while (running) {
      peak = Math.max(
        peak,
        replicas.reduce((n, r) => n + inFlightOf(r), 0),
      );
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  const statuses = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const res = await replicas[i % replicas.length]?.app.inject({
        method: 'POST',
        url: '/generate',
        payload: { model: MODEL, text: `request ${i}`, sampling_params: { max_new_tokens: 10 } },
      });
      return res?.statusCode;
    }),
  );
  running = false;
  await sampler;
  return { peak, statuses };
}

describe('a fleet-wide admission bound', () => {
  it('three replicas admit the CachePolicy bound together, and two take a draining third one share', async () => {
    const ns = await createTestNamespace(kubeconfig, 'gw-fleet');
    // 10 decode steps of 40 ms: every request is in flight for about 0.4 s.
    const sim = await startSim([
      '--model-path',
      'm',
      '--sim-decode-base-ms',
      '40',
      '--max-running-requests',
      '64',
    ]);
    cleanups.push(() => sim.close());
    await setUp(ns, sim);
    await apply(ns, slice([{ name: 'gw-a' }, { name: 'gw-b' }, { name: 'gw-c' }]));
    const replicas = await Promise.all(['gw-a', 'gw-b', 'gw-c'].map((self) => startReplica(ns, self)));
    await eventually(() => expect(replicas.map((r) => r.peers.members().length)).toEqual([3, 3, 3]));

    const three = await load(replicas, 36);
    expect(three.statuses.every((s) => s === 200)).toBe(true);
    expect(three.peak).toBeLessThanOrEqual(BOUND);
    expect(three.peak).toBeGreaterThanOrEqual(BOUND - 1); // the load was enough to reach it

    // gw-c drains: the Service stops sending to it, and its share goes to the other two.
    await apply(ns, slice([{ name: 'gw-a' }, { name: 'gw-b' }, { name: 'gw-c', terminating: true }]));
    await eventually(() =>
      expect(replicas.map((r) => r.peers.members())).toEqual(Array(3).fill(['gw-a', 'gw-b'])),
    );
    const two = await load(replicas.slice(0, 2), 24);
    expect(two.statuses.every((s) => s === 200)).toBe(true);
    expect(two.peak).toBeLessThanOrEqual(BOUND);
    expect(two.peak).toBeGreaterThanOrEqual(BOUND - 1);
  });
});
