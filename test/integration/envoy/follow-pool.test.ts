// make run PICKER=1's follower (hack/envoy/follow-pool.ts) against a real kube-apiserver: a
// FailOpen InferencePool, its pods (Ready and given IPs by status patches, no kubelet) and the
// Deployment's runtime key Secret; each change a rollout makes reaches the pool endpoints file
// a running Envoy follows (hack/envoy/pool-endpoints-file.test.ts: that Envoy follows the file).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, expect, inject, it } from 'vitest';
import { followInferencePool, type FollowOutcome } from '../../../hack/envoy/follow-pool.ts';
import { installGieCrds } from '../../support/gie.ts';
import { createTestNamespace, eventually, kubectlOk } from '../../support/kubectl.ts';

const kubeconfig = inject('kubeconfig');
const SECRET = 'llama-runtime-api-key';
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
beforeAll(() => installGieCrds(kubeconfig), 120_000);

const kubectl = (ns: string, args: string[], input?: unknown): Promise<string> =>
  kubectlOk(['-n', ns, ...args], {
    kubeconfig,
    ...(input !== undefined ? { input: JSON.stringify(input) } : {}),
  });

const keySecret = (keys: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: SECRET, labels: { 'cacheroute.dev/runtime-api-key': 'true' } },
  stringData: keys,
});

/** A Ready runtime pod of llama at `ip`, reading its key from the Secret's `entry` (its identity). */
async function readyPod(ns: string, name: string, ip: string, entry: string): Promise<void> {
  await kubectl(ns, ['create', '-f', '-'], {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { 'cacheroute.dev/deployment': 'llama' } },
    spec: {
      containers: [
        {
          name: 'sglang',
          image: 'sglang',
          env: [
            { name: 'CACHEROUTE_RUNTIME_API_KEY', valueFrom: { secretKeyRef: { name: SECRET, key: entry } } },
          ],
        },
      ],
    },
  });
  const status = {
    phase: 'Running',
    podIP: ip,
    podIPs: [{ ip }],
    conditions: [{ type: 'Ready', status: 'True' }],
  };
  await kubectl(ns, [
    'patch',
    'pod',
    name,
    '--subresource=status',
    '--type=merge',
    '-p',
    JSON.stringify({ status }),
  ]);
}

/** The file's endpoints, `ip:port` → the Authorization Envoy sets for it. */
function endpointsIn(file: string): Record<string, string> {
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as {
    resources: {
      endpoints: {
        lb_endpoints: {
          endpoint: { address: { socket_address: { address: string; port_value: number } } };
          metadata?: { filter_metadata: { 'cacheroute.runtime': { authorization: string } } };
        }[];
      }[];
    }[];
  };
  const out: Record<string, string> = {};
  for (const e of parsed.resources[0]?.endpoints[0]?.lb_endpoints ?? []) {
    const a = e.endpoint.address.socket_address;
    out[`${a.address}:${a.port_value}`] =
      e.metadata?.filter_metadata['cacheroute.runtime'].authorization ?? '';
  }
  return out;
}

it('follows a rollout: new pods with their identity key, a rotated key, pods gone; warns on a mode change', async () => {
  const ns = await createTestNamespace(kubeconfig, 'follow-pool');
  await kubectl(ns, ['apply', '-f', '-'], {
    apiVersion: 'inference.networking.k8s.io/v1',
    kind: 'InferencePool',
    metadata: { name: 'llama' },
    spec: {
      selector: { matchLabels: { 'cacheroute.dev/deployment': 'llama' } },
      targetPorts: [{ number: 30000 }],
      endpointPickerRef: { name: 'cacheroute-picker', port: { number: 9002 }, failureMode: 'FailOpen' },
    },
  });
  await kubectl(ns, ['apply', '-f', '-'], keySecret({ 'fp-old': 'key-old' }));
  await readyPod(ns, 'llama-old', '10.244.251.1', 'fp-old');

  const dir = mkdtempSync(join(tmpdir(), 'follow-pool-'));
  const file = join(dir, 'pool-endpoints.json');
  const outcomes: FollowOutcome[] = [];
  const follower = await followInferencePool({
    kubeconfig,
    namespace: ns,
    name: 'llama',
    failureMode: 'FailOpen',
    file,
    onOutcome: (o) => outcomes.push(o),
  });
  cleanups.push(async () => {
    await follower.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const fileHolds = (want: Record<string, string>): Promise<void> =>
    eventually(() => expect(endpointsIn(file)).toEqual(want), { timeoutMs: 20_000 });

  await fileHolds({ '10.244.251.1:30000': 'Bearer key-old' });

  // A rollout: the new identity's key first (the operator writes it before the pods), then its pod.
  await kubectl(ns, ['apply', '-f', '-'], keySecret({ 'fp-old': 'key-old', 'fp-new': 'key-new' }));
  await readyPod(ns, 'llama-new', '10.244.251.2', 'fp-new');
  await fileHolds({ '10.244.251.1:30000': 'Bearer key-old', '10.244.251.2:30000': 'Bearer key-new' });

  // A key rotated in place, then the old pod gone.
  await kubectl(ns, ['apply', '-f', '-'], keySecret({ 'fp-old': 'key-old', 'fp-new': 'key-newer' }));
  await fileHolds({ '10.244.251.1:30000': 'Bearer key-old', '10.244.251.2:30000': 'Bearer key-newer' });
  await kubectl(ns, ['delete', 'pod', 'llama-old', '--wait=false', '--grace-period=0', '--force']);
  await fileHolds({ '10.244.251.2:30000': 'Bearer key-newer' });

  // A pod whose key is not in the Secret: the last good file stays, and the follower says why.
  await readyPod(ns, 'llama-keyless', '10.244.251.3', 'fp-missing');
  await eventually(() =>
    expect(outcomes.at(-1)).toMatchObject({
      kind: 'not-followed',
      reason: expect.stringMatching(/no key in Secret/),
    }),
  );
  expect(endpointsIn(file)).toEqual({ '10.244.251.2:30000': 'Bearer key-newer' });
  await kubectl(ns, ['delete', 'pod', 'llama-keyless', '--wait=false', '--grace-period=0', '--force']);

  // FailClose needs another bootstrap: the file is kept and the follower says to restart.
  await kubectl(ns, [
    'patch',
    'inferencepool',
    'llama',
    '--type=merge',
    '-p',
    JSON.stringify({ spec: { endpointPickerRef: { failureMode: 'FailClose' } } }),
  ]);
  await eventually(() =>
    expect(outcomes.at(-1)).toMatchObject({ kind: 'not-followed', reason: expect.stringMatching(/restart/) }),
  );
  expect(endpointsIn(file)).toEqual({ '10.244.251.2:30000': 'Bearer key-newer' });
});
