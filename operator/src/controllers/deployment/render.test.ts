import { describe, expect, it } from 'vitest';
import { loadSample } from '../../../../test/support/samples.ts';
import { renderManifest, RUNTIME_KEY_PLACEHOLDER } from './render.ts';

const ingress = {
  gateway: { namespace: 'cacheroute-system', podLabels: { 'app.kubernetes.io/component': 'gateway' } },
  operator: { namespace: 'cacheroute-system', podLabels: { 'app.kubernetes.io/component': 'operator' } },
};

describe('renderManifest', () => {
  it("shows the runtime key Secret, keyed by the pods' fingerprint, with a placeholder for the key", () => {
    const r = renderManifest(loadSample('deployment-dense.yaml'));
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    const secret = r.objects.find((o) => o.kind === 'Secret') as unknown as {
      stringData: Record<string, string>;
    };
    const workload = r.objects.find((o) => o.kind === 'Deployment') as unknown as {
      spec: { template: { metadata: { labels: Record<string, string> } } };
    };
    const fingerprint = workload.spec.template.metadata.labels['cacheroute.dev/fingerprint'] ?? '';
    expect(secret.stringData).toEqual({ [fingerprint]: RUNTIME_KEY_PLACEHOLDER });
    expect(r.objects.some((o) => o.kind === 'NetworkPolicy')).toBe(false);
  });

  it("shows the L3 claim of HiCache's file backend, and the pods mounting it", () => {
    const doc = loadSample('deployment-hicache.yaml');
    doc.spec['hicache'] = { ratio: 2, storage: { backend: 'file', volume: { size: '2Ti' } } };
    const r = renderManifest(doc);
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    const claims = r.objects.filter((o) => o.kind === 'PersistentVolumeClaim') as unknown as {
      metadata: { name: string };
      spec: unknown;
    }[];
    expect(claims.map((c) => [c.metadata.name, c.spec])).toEqual([
      ['qwen-32b-sglang-l3', { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '2Ti' } } }],
    ]);
    const workload = r.objects.find((o) => o.kind === 'Deployment') as unknown as {
      spec: { template: { spec: { volumes: { name: string }[] } } };
    };
    expect(workload.spec.template.spec.volumes.map((v) => v.name)).toContain('hicache-l3');
  });

  it('renders nothing for a hostPath source outside the operator’s --host-path-roots', () => {
    const doc = loadSample('deployment-pd-hisparse.yaml');
    const model = doc.spec['model'] as { source: { hostPath: { path: string } } };
    model.source.hostPath.path = '/';
    const refused = renderManifest(doc);
    expect(refused.ok ? [] : refused.issues.map((i) => i.message)).toEqual([
      expect.stringContaining('is outside the directories the operator may mount'),
    ]);
    expect(renderManifest(doc, { hostPathRoots: ['/'] }).ok).toBe(true);
  });

  it("adds the NetworkPolicy when given the operator's ingress peers", () => {
    const r = renderManifest(loadSample('deployment-dense.yaml'), { runtimeIngress: ingress });
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    const policies = r.objects.filter((o) => o.kind === 'NetworkPolicy');
    expect(policies.map((p) => p.metadata?.name)).toEqual(['llama-8b-runtime-ingress']);
  });
});
