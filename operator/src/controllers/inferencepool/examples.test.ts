// examples/inference-gateways: an HTTPRoute to the pool for each GIE gateway. Each routes only to
// InferencePools the operator keeps (named after a sample Deployment), through a Gateway of that
// implementation's class, with no route timeout (generations stream for minutes).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { validateResource } from '#api';
import { EXAMPLES_DIR, loadSamples } from '../../../../test/support/samples.ts';
import { buildInferencePoolName } from './desired.ts';

const DIR = join(EXAMPLES_DIR, 'inference-gateways');
/** Each implementation's GatewayClass, from its own docs (docs/picker.md#gateways). */
const CLASSES: Record<string, string> = {
  'istio.yaml': 'istio',
  'agentgateway.yaml': 'agentgateway',
  'nginx-gateway-fabric.yaml': 'nginx',
  'envoy-ai-gateway.yaml': 'envoy-ai-gateway',
};

interface Doc {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: {
    gatewayClassName?: string;
    parentRefs?: { name: string }[];
    rules?: {
      backendRefs?: { group?: string; kind?: string; name: string }[];
      timeouts?: { request?: string };
    }[];
  };
}

const pools = new Set(
  loadSamples().flatMap(({ doc }) => {
    const r = validateResource(doc);
    return r.ok && r.value.kind === 'Deployment' ? [buildInferencePoolName(r.value)] : [];
  }),
);

describe('examples/inference-gateways', () => {
  it('has one file per GIE gateway the docs name', () => {
    expect(
      readdirSync(DIR)
        .filter((f) => f.endsWith('.yaml'))
        .sort(),
    ).toEqual(Object.keys(CLASSES).sort());
  });

  it.each(Object.entries(CLASSES))('%s routes to operator pools through a %s Gateway', (file, cls) => {
    const docs = parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((d) => d.toJS() as Doc);
    const gateways = docs.filter((d) => d.kind === 'Gateway');
    expect(gateways.map((g) => g.spec.gatewayClassName)).toEqual([cls]);
    const routes = docs.filter((d) => d.kind === 'HTTPRoute');
    expect(routes.length).toBeGreaterThan(0);
    for (const route of routes) {
      expect(route.metadata.namespace).toBe(gateways[0]?.metadata.namespace);
      expect(route.spec.parentRefs?.map((p) => p.name)).toEqual([gateways[0]?.metadata.name]);
      for (const rule of route.spec.rules ?? []) {
        expect(rule.timeouts?.request).toBe('0s');
        for (const ref of rule.backendRefs ?? []) {
          expect(ref).toMatchObject({ group: 'inference.networking.k8s.io', kind: 'InferencePool' });
          expect(pools).toContain(ref.name);
        }
      }
    }
  });
});
