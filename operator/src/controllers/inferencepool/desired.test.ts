import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource } from '#api';
import { loadSamples } from '../../../../test/support/samples.ts';
import { buildDesired } from '../deployment/desired.ts';
import { LWS_WORKER_INDEX_LABEL } from '../deployment/multi-node/leader-worker-set.ts';
import { buildInferencePool, buildPoolSelector } from './desired.ts';

const PICKER = { namespace: 'team-a', name: 'cr-picker', port: 9002 };
const DEPLOYMENT_SAMPLES = loadSamples().filter((s) => s.doc.kind === 'Deployment');

function parse(doc: unknown): DeploymentResource {
  const r = validateResource(doc);
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error(JSON.stringify(r));
  return { ...r.value, metadata: { namespace: 'team-a', uid: 'uid-1', ...r.value.metadata } };
}

const selects = (selector: Record<string, string>, labels: Record<string, string> | undefined): boolean =>
  Object.entries(selector).every(([k, v]) => labels?.[k] === v);

describe('buildPoolSelector', () => {
  it.each(DEPLOYMENT_SAMPLES.map((s) => [s.file, s.doc] as const))(
    '%s: selects its serving pods, every role, and nothing a Service of it leaves out',
    (_file, doc) => {
      const root = parse(doc);
      const desired = buildDesired(root);
      const selector = buildPoolSelector(root);
      // The pods its Services select, one per role, are the serving ones: the pool is their union.
      for (const svc of desired.services) {
        const { ['cacheroute.dev/role']: role, ...rest } = svc.spec?.selector ?? {};
        expect(role).toBeDefined();
        expect(rest).toEqual(selector);
      }
      for (const w of desired.workloads)
        expect(selects(selector, w.spec?.template.metadata?.labels)).toBe(true);
      for (const g of desired.groupSets) {
        const tpl = g.spec.leaderWorkerTemplate;
        // LWS labels each pod with its index in the group: the leader 0, the workers 1..n-1.
        const leader = { ...tpl.leaderTemplate?.metadata?.labels, [LWS_WORKER_INDEX_LABEL]: '0' };
        const worker = { ...tpl.workerTemplate.metadata?.labels, [LWS_WORKER_INDEX_LABEL]: '1' };
        expect(selects(selector, leader)).toBe(true);
        expect(selects(selector, worker)).toBe(false);
      }
      // Another Deployment's pods, of the same model and role, are not in it.
      const other = buildDesired({ ...root, metadata: { ...root.metadata, name: 'other' } });
      for (const w of other.workloads)
        expect(selects(selector, w.spec?.template.metadata?.labels)).toBe(false);
    },
  );
});

describe('buildInferencePool', () => {
  it("names the Deployment's pool after it, owned by it, on SGLang's port, with the picker and failure mode", () => {
    const doc = DEPLOYMENT_SAMPLES.find((s) => s.file === 'deployment-dense.yaml')?.doc;
    const pool = buildInferencePool(parse(doc), PICKER, 'FailOpen');
    expect(pool).toMatchObject({
      apiVersion: 'inference.networking.k8s.io/v1',
      kind: 'InferencePool',
      metadata: {
        name: 'llama-8b',
        namespace: 'team-a',
        ownerReferences: [expect.objectContaining({ kind: 'Deployment', uid: 'uid-1', controller: true })],
      },
      spec: {
        selector: { matchLabels: { 'cacheroute.dev/deployment': 'llama-8b' } },
        targetPorts: [{ number: 30000 }],
        appProtocol: 'http',
        endpointPickerRef: {
          group: '',
          kind: 'Service',
          name: 'cr-picker',
          port: { number: 9002 },
          failureMode: 'FailOpen',
        },
      },
    });
  });
});
