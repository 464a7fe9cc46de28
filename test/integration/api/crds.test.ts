// The CRDs against a real kube-apiserver: they install, every sample is
// accepted, every invalid manifest is refused with its expected words, and
// kubectl's explain, categories and scale work on them.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { renderManifest } from '../../../operator/src/controllers/deployment/render.ts';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildInvalid, INVALID_CASES, UPDATE_CASES } from '../../support/invalid-manifests.ts';
import { kubectl, kubectlOk } from '../../support/kubectl.ts';
import { EXAMPLES_DIR, loadSample, loadSamples, REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const CRD_DIR = join(REPO_ROOT, 'crds');
const NS = `crds-${process.pid}`;

async function applyJson(obj: unknown, ...extra: string[]) {
  return kubectl(['apply', '-n', NS, ...extra, '-f', '-'], { kubeconfig, input: JSON.stringify(obj) });
}

beforeAll(async () => {
  await kubectlOk(['apply', '--server-side', '-f', CRD_DIR], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', CRD_DIR], { kubeconfig });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig });
});

afterAll(async () => {
  await kubectl(['delete', 'namespace', NS, '--wait=false'], { kubeconfig });
});

describe('CRD installation', () => {
  it.each(readdirSync(CRD_DIR).map((f) => [f] as const))(
    '%s is Established with names accepted',
    async (file) => {
      const name = file.replace(/\.yaml$/, '');
      const out = await kubectlOk(['get', 'crd', name, '-o', 'json'], { kubeconfig });
      const conds = (JSON.parse(out) as { status: { conditions: { type: string; status: string }[] } }).status
        .conditions;
      expect(conds).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ type: 'Established', status: 'True' }),
          expect.objectContaining({ type: 'NamesAccepted', status: 'True' }),
        ]),
      );
    },
  );
});

describe('samples', () => {
  it.each(loadSamples().map((s) => [s.file, s.doc.kind] as const))(
    '%s (%s) is accepted by --dry-run=server',
    async (file) => {
      const res = await kubectl(['apply', '-n', NS, '--dry-run=server', '-f', join(EXAMPLES_DIR, file)], {
        kubeconfig,
      });
      expect(res.stderr).toBe('');
      expect(res.code).toBe(0);
    },
  );
});

// examples/autoscaling: HPAs and KEDA ScaledObjects on the parts of the disaggregated sample.
describe('autoscaling examples', () => {
  const dir = join(EXAMPLES_DIR, 'autoscaling');
  const docs = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((d) => {
        const doc = d.toJS() as {
          kind: string;
          metadata: { name: string };
          spec: { scaleTargetRef: { apiVersion: string; kind: string; name: string } };
        };
        return { file, doc };
      }),
    );
  // What the operator makes for the samples: the DeploymentParts an example may target.
  const parts = loadSamples().flatMap(({ doc }) => {
    const r = renderManifest(doc);
    return r.ok ? r.objects.filter((o) => o.kind === 'DeploymentPart').map((o) => o.metadata?.name) : [];
  });

  it.each(docs.filter((d) => d.doc.kind === 'HorizontalPodAutoscaler').map((d) => [d.file, d.doc] as const))(
    '%s is accepted by --dry-run=server',
    async (_file, doc) => {
      const res = await applyJson(doc, '--dry-run=server');
      expect(res.stderr).toBe('');
      expect(res.code).toBe(0);
    },
  );

  // KEDA's CRDs are not installed here: a ScaledObject cannot be applied, only its target checked.
  it.each(docs.map((d) => [`${d.file} ${d.doc.kind}/${d.doc.metadata.name}`, d.doc] as const))(
    '%s targets a DeploymentPart the operator makes for a sample',
    (_name, doc) => {
      expect(['HorizontalPodAutoscaler', 'ScaledObject']).toContain(doc.kind);
      expect(doc.spec.scaleTargetRef).toMatchObject({
        apiVersion: 'cacheroute.dev/v1alpha1',
        kind: 'DeploymentPart',
      });
      expect(parts).toContain(doc.spec.scaleTargetRef.name);
    },
  );
});

describe('invalid manifests', () => {
  it(`the table holds at least 25 cases (${INVALID_CASES.length})`, () => {
    expect(INVALID_CASES.length).toBeGreaterThanOrEqual(25);
  });

  it.each(INVALID_CASES.map((c) => [c.name, c] as const))('refuses %s', async (_name, c) => {
    const res = await applyJson(buildInvalid(c), '--dry-run=server');
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(c.expect);
  });
});

describe('update rules', () => {
  it.each(UPDATE_CASES.map((c, i) => [c.name, c, i] as const))('%s', async (_name, c, i) => {
    const obj = loadSample(c.sample);
    obj.metadata.name = `${obj.metadata.name}-u${i}`;
    await kubectlOk(['create', '--save-config', '-n', NS, '-f', '-'], {
      kubeconfig,
      input: JSON.stringify(obj),
    });
    if (c.status) {
      const patch = JSON.stringify({ status: c.status });
      await kubectlOk(
        [
          'patch',
          '-n',
          NS,
          obj.kind.toLowerCase() + '.cacheroute.dev',
          obj.metadata.name,
          '--subresource=status',
          '--type=merge',
          '-p',
          patch,
        ],
        { kubeconfig },
      );
    }
    const next = structuredClone(obj);
    c.mutate(next);
    const res = await applyJson(next);
    if (c.expect === null) {
      expect(res.stderr).toBe('');
      expect(res.code).toBe(0);
    } else {
      expect(res.code).not.toBe(0);
      expect(res.stderr).toContain(c.expect);
    }
  });
});

describe('kubectl on the CRDs', () => {
  it('explain shows the field descriptions', async () => {
    const out = await kubectlOk(['explain', 'deployments.cacheroute.dev.spec.deploymentId'], { kubeconfig });
    expect(out).toContain('Change it when weights, tokenizer, runtime build');
    const policy = await kubectlOk(['explain', 'cachepolicies.spec.cacheNamespace'], { kubeconfig });
    expect(policy).toContain('it grants no access');
  });

  it('lists every kind under the cacheroute category with printer columns', async () => {
    await kubectlOk(['apply', '-n', NS, '-f', join(EXAMPLES_DIR, 'deployment-dense.yaml')], { kubeconfig });
    await kubectlOk(['apply', '-n', NS, '-f', join(EXAMPLES_DIR, 'cachepolicy.yaml')], { kubeconfig });
    const out = await kubectlOk(['get', 'cacheroute', '-n', NS], { kubeconfig });
    expect(out).toMatch(/deployment\.cacheroute\.dev\/llama-8b/);
    expect(out).toMatch(/cachepolicy\.cacheroute\.dev\/team-a/);
    const sgd = await kubectlOk(['get', 'sgd', 'llama-8b', '-n', NS], { kubeconfig });
    expect(sgd.split('\n')[0]).toMatch(
      /NAME\s+DEPLOYMENT-ID\s+PROFILE\s+READY\s+REPLICAS\s+SERVING\s+VERIFIED\s+ROUTABLE\s+WEIGHT\s+HIT-RATE\s+AGE/,
    );
    expect(sgd).toContain('llama-3-1-8b-instruct-r1');
  });

  it('scales a DeploymentPart through its scale subresource, and lists it under the category', async () => {
    const part = {
      apiVersion: 'cacheroute.dev/v1alpha1',
      kind: 'DeploymentPart',
      metadata: { name: 'chat-prefill' },
      spec: { deployment: 'chat', part: 'prefill', replicas: 1 },
    };
    await applyJson(part);
    await kubectlOk(['scale', '-n', NS, 'sgdpart/chat-prefill', '--replicas=4'], { kubeconfig });
    const replicas = await kubectlOk(
      ['get', '-n', NS, 'sgdpart/chat-prefill', '-o', 'jsonpath={.spec.replicas}'],
      { kubeconfig },
    );
    expect(replicas).toBe('4');
    const listed = await kubectlOk(['get', 'sgdpart', 'chat-prefill', '-n', NS], { kubeconfig });
    expect(listed.split('\n')[0]).toMatch(/NAME\s+DEPLOYMENT\s+PART\s+DESIRED\s+CURRENT\s+READY\s+AGE/);
    expect(await kubectlOk(['get', 'cacheroute', '-n', NS], { kubeconfig })).toMatch(
      /deploymentpart\.cacheroute\.dev\/chat-prefill/,
    );
  });

  it('scales a standalone Deployment through the scale subresource', async () => {
    await kubectlOk(['apply', '-n', NS, '-f', join(EXAMPLES_DIR, 'deployment-dense.yaml')], { kubeconfig });
    await kubectlOk(['scale', '-n', NS, 'sgd/llama-8b', '--replicas=5'], { kubeconfig });
    const replicas = await kubectlOk(['get', '-n', NS, 'sgd/llama-8b', '-o', 'jsonpath={.spec.replicas}'], {
      kubeconfig,
    });
    expect(replicas).toBe('5');
  });

  it('applies schema defaults in the API server', async () => {
    await kubectlOk(['apply', '-n', NS, '-f', join(EXAMPLES_DIR, 'cachepolicy.yaml')], { kubeconfig });
    const out = await kubectlOk(
      ['get', '-n', NS, 'cachepolicy/team-a', '-o', 'jsonpath={.spec.routing.prefixHash.loadFactor}'],
      { kubeconfig },
    );
    expect(out).toBe('1.25');
  });
});
