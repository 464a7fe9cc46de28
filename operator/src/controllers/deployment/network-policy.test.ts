import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource } from '#api';
import { loadSample } from '../../../../test/support/samples.ts';
import { buildRuntimeNetworkPolicy, type RuntimeIngress } from './network-policy.ts';

function parse(
  file: string,
  mutate: (spec: Record<string, unknown>) => void = () => undefined,
): DeploymentResource {
  const doc = loadSample(file);
  mutate(doc.spec);
  const r = validateResource(doc);
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error(JSON.stringify(r));
  return { ...r.value, metadata: { namespace: 'team-a', uid: 'uid-1', ...r.value.metadata } };
}

const INGRESS: RuntimeIngress = {
  gateway: { namespace: 'cacheroute-system', podLabels: { 'app.kubernetes.io/component': 'gateway' } },
  operator: { namespace: 'cacheroute-system', podLabels: { 'app.kubernetes.io/component': 'operator' } },
};
const inNamespace = (ns: string, labels: Record<string, string>) => ({
  namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
  podSelector: { matchLabels: labels },
});
const HTTP = { protocol: 'TCP', port: 30000 };

describe('buildRuntimeNetworkPolicy', () => {
  it('selects every pod of the Deployment and admits its own pods, the gateway and the operator only', () => {
    const np = buildRuntimeNetworkPolicy(parse('deployment-dense.yaml'), INGRESS);
    expect(np.metadata).toMatchObject({
      name: 'llama-8b-runtime-ingress',
      namespace: 'team-a',
      ownerReferences: [expect.objectContaining({ kind: 'Deployment', uid: 'uid-1', controller: true })],
    });
    expect(np.spec).toEqual({
      podSelector: { matchLabels: { 'cacheroute.dev/deployment': 'llama-8b' } },
      policyTypes: ['Ingress'],
      ingress: [
        // Own pods on every port (no `ports`): PD transfer, bootstrap, ranks.
        { from: [{ podSelector: { matchLabels: { 'cacheroute.dev/deployment': 'llama-8b' } } }] },
        {
          from: [inNamespace('cacheroute-system', { 'app.kubernetes.io/component': 'gateway' })],
          ports: [HTTP],
        },
        {
          from: [inNamespace('cacheroute-system', { 'app.kubernetes.io/component': 'operator' })],
          ports: [HTTP],
        },
      ],
    });
  });

  it("admits the gateway to the runtime's event publishers, every rank's", () => {
    const root = parse('deployment-dense.yaml', (s) => {
      s['events'] = { kvCache: true, load: true };
      s['parallelism'] = { tensor: 1, data: 2 };
    });
    const np = buildRuntimeNetworkPolicy(root, INGRESS);
    // KV 5557-5558, replay 5559-5560, load 5561-5562 (args.ts computeEventPorts).
    expect(np.spec.ingress[1]?.ports).toEqual([HTTP, { protocol: 'TCP', port: 5557, endPort: 5562 }]);
  });

  it('admits Prometheus to the HTTP port (/metrics) only when a scraper is given', () => {
    const root = parse('deployment-dense.yaml');
    expect(buildRuntimeNetworkPolicy(root, INGRESS).spec.ingress).toHaveLength(3);
    const np = buildRuntimeNetworkPolicy(root, {
      ...INGRESS,
      metrics: { namespace: 'monitoring', podLabels: { 'app.kubernetes.io/name': 'prometheus' } },
    });
    expect(np.spec.ingress[3]).toEqual({
      from: [inNamespace('monitoring', { 'app.kubernetes.io/name': 'prometheus' })],
      ports: [HTTP],
    });
  });
});
