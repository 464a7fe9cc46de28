// GIE's conformance checks that test a gateway controller (its status conditions on
// InferencePools and HTTPRoutes, conformance/ v1.6.0), reproduced for what cacheroute owns in
// them: the InferencePools its operator keeps, on a real API server with GIE's pinned CRDs, the
// garbage collector, ReplicaSet and Deployment controllers. Each `it` carries the suite's test
// name; what only a gateway controller can do (write the conditions, translate routes) is in
// docs/picker.md's table. The data plane's half of these checks is
// gateway/src/app.picker-gie-checks.test.ts.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '#kube/logger.ts';
import { PICKER_SERVICE_MISSING } from '../../../operator/src/controllers/inferencepool/reconciler.ts';
import { startOperator } from '../../../operator/src/operator.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../../support/controlplane.ts';
import { eventually, kubectlOk, listEvents } from '../../support/kubectl.ts';
import { REPO_ROOT } from '../../support/samples.ts';

const PICKER = 'cacheroute-picker';

interface Pool {
  metadata: { name: string; generation: number };
  spec: {
    selector: { matchLabels: Record<string, string> };
    targetPorts: { number: number }[];
    appProtocol?: string;
    endpointPickerRef?: { kind?: string; name: string; port?: { number: number }; failureMode?: string };
  };
  status?: { parents?: { parentRef: { name: string }; conditions: { type: string; status: string }[] }[] };
}

let cp: ControlPlane;
let ns: string;
let stopOperator: (() => Promise<void>) | undefined;
const k = () => ({ kubeconfig: cp.kubeconfig });

async function apply(manifest: object, namespace = ns): Promise<void> {
  await kubectlOk(['apply', '-n', namespace, '-f', '-'], { ...k(), input: JSON.stringify(manifest) });
}

async function pool(name: string, namespace = ns): Promise<Pool | undefined> {
  const out = await kubectlOk(
    ['get', 'inferencepools', '-n', namespace, '-o', 'json', '--ignore-not-found', name],
    k(),
  );
  return out.trim() === '' ? undefined : (JSON.parse(out) as Pool);
}

async function poolMade(name: string, namespace = ns): Promise<Pool> {
  return eventually(
    async () => {
      const p = await pool(name, namespace);
      expect(p).toBeDefined();
      return p as Pool;
    },
    { timeoutMs: 60_000 },
  );
}

interface PodJson {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { containers: { name: string; ports?: { containerPort: number }[] }[] };
}

async function podsSelected(labels: Record<string, string>, namespace = ns): Promise<PodJson[]> {
  const selector = Object.entries(labels)
    .map(([key, v]) => `${key}=${v}`)
    .join(',');
  const out = await kubectlOk(['get', 'pods', '-n', namespace, '-l', selector, '-o', 'json'], k());
  return (JSON.parse(out) as { items: PodJson[] }).items;
}

beforeAll(async () => {
  cp = await startControlPlane({
    full: true,
    inferencePool: true,
    controllers: ['deployment', 'replicaset', 'garbagecollector'],
  });
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], k());
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], k());
  // The plane is this file's own: one namespace, for the file's life.
  ns = 'gie-checks';
  await kubectlOk(['create', 'namespace', ns], k());
  const op = await startOperator({
    kubeconfig: cp.kubeconfig,
    namespaces: [ns],
    logger: createLogger({ level: 'error', fields: { component: 'operator' } }),
    leaderElection: false,
    http: false,
    picker: { namespace: ns, name: PICKER, port: 9002 },
  });
  stopOperator = () => op.stop();
  // The suite's two pools: two Deployments (two models), two replicas each.
  await apply(buildDeploymentManifest({ name: 'primary', replicas: 2 }));
  await apply(buildDeploymentManifest({ name: 'secondary', replicas: 2 }));
}, 300_000);

afterAll(async () => {
  await stopOperator?.();
  await cp?.stop();
});

describe("GIE's gateway-controller checks: the InferencePools cacheroute keeps", () => {
  it('InferencePoolAccepted', async () => {
    // The API server took the operator's pool (GIE's CRD and its CEL rules): a pool a gateway
    // can accept. Accepted itself is the gateway's parent status: the operator writes none.
    const p = await poolMade('primary');
    expect(Object.keys(p.spec.selector.matchLabels).length).toBeGreaterThan(0);
    expect(p.spec.endpointPickerRef).toMatchObject({ kind: 'Service', name: PICKER, port: { number: 9002 } });
    expect(p.status?.parents ?? []).toEqual([]);
  });

  it('InferencePoolResolvedRefsCondition', async () => {
    // A gateway writes the pool's parent statuses as routes attach and detach; the operator's
    // re-applies (here: its CachePolicy's failureMode changing) keep them.
    const before = await poolMade('primary');
    const parents = [
      {
        parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'conformance-primary' },
        controllerName: 'example.com/gateway',
        conditions: ['Accepted', 'ResolvedRefs'].map((type) => ({
          type,
          status: 'True',
          reason: type,
          message: '',
          lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
          observedGeneration: before.metadata.generation,
        })),
      },
    ];
    await kubectlOk(
      [
        'patch',
        'inferencepools',
        'primary',
        '-n',
        ns,
        '--subresource=status',
        '--type=merge',
        '-p',
        JSON.stringify({ status: { parents } }),
      ],
      k(),
    );
    await apply(
      buildCachePolicyManifest('team-primary', ['primary'], {
        inferencePool: { failureMode: 'FailOpen' },
        tenancy: { sharePrefixes: true },
      }),
    );
    await eventually(async () =>
      expect((await pool('primary'))?.spec.endpointPickerRef?.failureMode).toBe('FailOpen'),
    );
    const after = await pool('primary');
    expect(after?.metadata.generation).toBeGreaterThan(before.metadata.generation);
    expect(after?.status?.parents?.map((s) => s.parentRef.name)).toEqual(['conformance-primary']);
    expect(after?.status?.parents?.[0]?.conditions.map((c) => `${c.type}=${c.status}`)).toEqual([
      'Accepted=True',
      'ResolvedRefs=True',
    ]);
  });

  it('InferencePoolMissingEPPRef', async () => {
    // Every pool the operator keeps names the picker; a pool without one (a user's) is valid to
    // the API server, and whether a gateway accepts it is the gateway's call.
    for (const name of ['primary', 'secondary'])
      expect((await poolMade(name)).spec.endpointPickerRef?.name).toBe(PICKER);
    await apply({
      apiVersion: 'inference.networking.k8s.io/v1',
      kind: 'InferencePool',
      metadata: { name: 'pool-with-missing-epp-ref' },
      spec: { selector: { matchLabels: { app: 'x' } }, targetPorts: [{ number: 30000 }] },
    });
    expect((await pool('pool-with-missing-epp-ref'))?.spec.endpointPickerRef).toBeUndefined();
  });

  it('InferencePoolInvalidEPPService', async () => {
    // The picker Service does not exist (the chart's standalone mode with the operator told of a
    // picker): the pool is kept, and the Deployment says why a gateway will not resolve it.
    await eventually(
      async () =>
        expect(await listEvents(cp.kubeconfig, ns, 'primary')).toContainEqual(
          expect.objectContaining({ type: 'Warning', reason: PICKER_SERVICE_MISSING }),
        ),
      { timeoutMs: 60_000 },
    );
    expect((await pool('primary'))?.spec.endpointPickerRef?.name).toBe(PICKER);
  });

  it('InferencePoolHTTPRoutePortValidation', async () => {
    // A backendRef's port, unset or given, is checked against the pool's targetPorts: the pool's
    // one port is the port SGLang serves on in every pod it selects.
    const p = await poolMade('primary');
    expect(p.spec.targetPorts).toEqual([{ number: 30000 }]);
    const pods = await eventually(async () => {
      const found = await podsSelected(p.spec.selector.matchLabels);
      expect(found).toHaveLength(2);
      return found;
    });
    for (const pod of pods)
      expect(pod.spec.containers.flatMap((c) => (c.ports ?? []).map((port) => port.containerPort))).toContain(
        30000,
      );
  });

  it('InferencePoolAppProtocol', async () => {
    // SGLang serves HTTP/1.1: the pool says `http` (not `kubernetes.io/h2c`), so a gateway
    // speaks HTTP/1.1 to the pods.
    expect((await poolMade('primary')).spec.appProtocol).toBe('http');
  });

  // Two pools the routes of the next three checks split between (two Gateways, two rules, two
  // weighted backendRefs): each pool's pods are its own Deployment's, never the other's.
  for (const check of [
    'HTTPRouteMultipleGatewaysDifferentPools',
    'HTTPRouteMultipleRulesDifferentPools',
    'GatewayWeightedAcrossTwoInferencePools',
  ])
    it(check, async () => {
      const [primary, secondary] = await Promise.all([poolMade('primary'), poolMade('secondary')]);
      const names = async (p: Pool): Promise<string[]> =>
        eventually(async () => {
          const found = (await podsSelected(p.spec.selector.matchLabels)).map((pod) => pod.metadata.name);
          expect(found).toHaveLength(2);
          return found.sort();
        });
      const [a, b] = await Promise.all([names(primary), names(secondary)]);
      expect(a.every((n) => n.startsWith('primary-'))).toBe(true);
      expect(b.every((n) => n.startsWith('secondary-'))).toBe(true);
    });

  it('HTTPRouteInvalidInferencePoolRef', async () => {
    // A route names a pool by its Deployment's name; the Deployment gone, so is its pool, and a
    // gateway reports the route's ResolvedRefs False BackendNotFound.
    await apply(buildDeploymentManifest({ name: 'gone', replicas: 1 }));
    await poolMade('gone');
    await kubectlOk(['delete', 'deployments.cacheroute.dev', 'gone', '-n', ns, '--wait=false'], k());
    await eventually(async () => expect(await pool('gone')).toBeUndefined(), { timeoutMs: 60_000 });
  });
});
