import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource } from '#api';
import { parseSglangArgs } from '#sglang/flags.ts';
import { checkSglangArgs } from '#sglang/startup-checks.ts';
import { loadSample } from '../../../../../test/support/samples.ts';
import { expandArgs } from '../../../../../test/support/container-args.ts';
import { buildDesired } from '../desired.ts';

function parse(doc: unknown): DeploymentResource {
  const r = validateResource(doc);
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error(JSON.stringify(r));
  return { ...r.value, metadata: { namespace: 'ns', uid: 'uid-1', ...r.value.metadata } };
}

const MULTI = parse(loadSample('deployment-multi-node.yaml'));
const LWS_ENV = new Map([
  ['LWS_LEADER_ADDRESS', 'llama-70b-sglang-0.llama-70b-sglang.ns'],
  ['LWS_WORKER_INDEX', '1'],
]);

describe('a Deployment across nodes', () => {
  const d = buildDesired(MULTI);
  const set = d.groupSets[0];
  const t = set?.spec.leaderWorkerTemplate;

  it('renders a LeaderWorkerSet of nodes-sized groups, replicas groups, restarted as a whole; no apps/v1 Deployment', () => {
    expect(d.workloads).toEqual([]);
    expect(d.groupSets).toHaveLength(1);
    expect(set).toMatchObject({
      apiVersion: 'leaderworkerset.x-k8s.io/v1',
      kind: 'LeaderWorkerSet',
      metadata: { name: 'llama-70b-sglang', namespace: 'ns' },
      spec: { replicas: 1, startupPolicy: 'LeaderCreated' },
    });
    expect(t?.size).toBe(2);
    expect(t?.restartPolicy).toBe('RecreateGroupOnPodRestart');
  });

  it("tells the leader rank 0 and a worker its LWS index, both the leader's address; each passes SGLang's checks", () => {
    const leader = expandArgs(t?.leaderTemplate.spec?.containers[0]?.args ?? [], LWS_ENV);
    const worker = expandArgs(t?.workerTemplate.spec?.containers[0]?.args ?? [], LWS_ENV);
    for (const [argv, rank] of [
      [leader, 0],
      [worker, 1],
    ] as const) {
      const parsed = parseSglangArgs(argv);
      if (!parsed.ok) throw new Error(parsed.error.message);
      expect(parsed.value.args).toMatchObject({
        nnodes: 2,
        node_rank: rank,
        tp_size: 8,
        dist_init_addr: 'llama-70b-sglang-0.llama-70b-sglang.ns:20000',
      });
      expect(checkSglangArgs(parsed.value.args)).toEqual([]);
    }
  });

  it('requests each pod its share of the tensor-parallel GPUs, with the identity labels and fingerprint', () => {
    for (const tpl of [t?.leaderTemplate, t?.workerTemplate]) {
      expect(tpl?.spec?.containers[0]?.resources?.limits).toMatchObject({ 'nvidia.com/gpu': '4' });
      expect(tpl?.metadata?.annotations?.['cacheroute.dev/fingerprint']).toBe(d.fingerprint);
      expect(tpl?.metadata?.labels?.['cacheroute.dev/fingerprint']).toBe(d.fingerprint);
    }
  });

  it('selects only the leaders in its Service, published before they are Ready (the workers dial them)', () => {
    expect(d.services[0]?.spec).toMatchObject({
      selector: { 'leaderworkerset.sigs.k8s.io/worker-index': '0', 'cacheroute.dev/role': 'standalone' },
      publishNotReadyAddresses: true,
    });
  });

  it('keeps --nnodes in the fingerprint: the same spec on one node is another identity', () => {
    const single = parse({
      ...loadSample('deployment-multi-node.yaml'),
      spec: { ...MULTI.spec, parallelism: { tensor: 8, nodes: 1 }, resources: {} },
    });
    const one = buildDesired(single);
    expect(one.fingerprint).not.toBe(d.fingerprint);
    expect(one.groupSets).toEqual([]);
    expect(one.workloads[0]?.spec?.template.spec?.containers[0]?.args).not.toContain('--nnodes');
  });
});
