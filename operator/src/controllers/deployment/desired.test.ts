import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { V1Deployment } from '@kubernetes/client-node';
import { validateResource, type DeploymentResource } from '#api';
import { parseSglangArgs } from '#sglang/flags.ts';
import { checkSglangArgs } from '#sglang/startup-checks.ts';
import { loadSample, loadSamples } from '../../../../test/support/samples.ts';
import { buildArgv, computeDeclaredIdentity } from './args.ts';
import { buildDesired } from './desired.ts';
import { planRoles } from './roles.ts';
import { renderManifest } from './render.ts';

const GOLDEN_DIR = join(dirname(fileURLToPath(import.meta.url)), 'testdata');
const DEPLOYMENT_SAMPLES = loadSamples().filter((s) => s.doc.kind === 'Deployment');

function parse(doc: unknown): DeploymentResource {
  const r = validateResource(doc);
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error(JSON.stringify(r));
  return { ...r.value, metadata: { namespace: 'ns', uid: 'uid-1', ...r.value.metadata } };
}

function container(w: V1Deployment) {
  const c = w.spec?.template.spec?.containers[0];
  if (!c) throw new Error('no container');
  return c;
}

describe('renderManifest (golden)', () => {
  it.each(DEPLOYMENT_SAMPLES.map((s) => [s.file, s.doc] as const))(
    '%s renders as its golden file',
    (file, doc) => {
      const result = renderManifest(doc);
      if (!result.ok) throw new Error(JSON.stringify(result.issues));
      const text = result.objects
        .map((o) => `---\n${stringify(o, { lineWidth: 0, aliasDuplicateObjects: false })}`)
        .join('');
      const golden = join(GOLDEN_DIR, file.replace(/\.yaml$/, '.golden.yaml'));
      // UPDATE_GOLDEN=1 rewrites the files; review the diff before committing it.
      if (process.env['UPDATE_GOLDEN'] === '1' || !existsSync(golden)) {
        mkdirSync(GOLDEN_DIR, { recursive: true });
        writeFileSync(golden, text);
      }
      expect(text).toBe(readFileSync(golden, 'utf8'));
    },
  );

  it('refuses an invalid manifest with the validation words', () => {
    const doc = loadSample('deployment-dense.yaml');
    (doc.spec['runtime'] as { image: string }).image = 'lmsysorg/sglang:latest';
    const result = renderManifest(doc);
    expect(result.ok).toBe(false);
    expect(result.ok ? '' : result.issues[0]?.message).toContain('pinned by digest');
  });
});

describe('buildDesired', () => {
  it.each(DEPLOYMENT_SAMPLES.map((s) => [s.file, s.doc] as const))(
    '%s: every emitted flag parses as SGLang would and passes its startup checks',
    (_file, doc) => {
      for (const w of buildDesired(parse(doc)).workloads) {
        const parsed = parseSglangArgs(container(w).args ?? []);
        if (!parsed.ok) throw new Error(parsed.error.message);
        expect(checkSglangArgs(parsed.value.args)).toEqual([]);
        expect(parsed.value.args.enable_metrics).toBe(true);
        expect(parsed.value.args.enable_cache_report).toBe(true);
      }
    },
  );

  it('renders prefill and decode parts for a disaggregated HiSparse deployment', () => {
    const d = buildDesired(parse(loadSample('deployment-pd-hisparse.yaml')));
    expect(d.workloads.map((w) => w.metadata?.name)).toEqual(['deepseek-v32-prefill', 'deepseek-v32-decode']);
    const [prefill, decode] = d.workloads.map((w) => container(w).args ?? []);
    // 8998 is SGLang's default bootstrap port, so it is left to SGLang (the version is part of the fingerprint).
    expect(prefill).toEqual(
      expect.arrayContaining(['--disaggregation-mode', 'prefill', '--enable-hierarchical-cache']),
    );
    expect(decode).toEqual(
      expect.arrayContaining([
        '--disaggregation-mode',
        'decode',
        '--enable-hisparse',
        '--disable-radix-cache',
      ]),
    );
    expect(decode).not.toContain('--disaggregation-bootstrap-port');
    expect(decode).not.toContain('--enable-hierarchical-cache');
    expect(d.workloads.map((w) => w.spec?.replicas)).toEqual([1, 2]);
  });

  it('renders the KV and load event publishers, one port range per data-parallel rank', () => {
    const doc = loadSample('deployment-dense.yaml');
    doc.spec['events'] = { kvCache: true, load: true };
    doc.spec['parallelism'] = { tensor: 1, data: 2 };
    const [w] = buildDesired(parse(doc)).workloads;
    const args = container(w!).args ?? [];
    const config = args[args.indexOf('--kv-events-config') + 1];
    expect(JSON.parse(config ?? '')).toEqual({
      publisher: 'zmq',
      endpoint: 'tcp://*:5557',
      replay_endpoint: 'tcp://*:5559',
      topic: 'kv',
    });
    expect(args).toEqual(expect.arrayContaining(['--load-publish-endpoint', 'auto']));
    expect(container(w!).ports?.map((p) => [p.name, p.containerPort])).toEqual([
      ['http', 30000],
      ['kv-events', 5557],
      ['kv-replay', 5559],
      ['load-events', 5561],
    ]);
  });

  it('renders no event publisher unless asked', () => {
    const args = container(buildDesired(parse(loadSample('deployment-dense.yaml'))).workloads[0]!).args ?? [];
    expect(args.some((a) => a.startsWith('--kv-events-config') || a.startsWith('--load-publish'))).toBe(
      false,
    );
  });

  it('renders a bootstrap port other than the default on the prefill part only', () => {
    const doc = loadSample('deployment-pd-hisparse.yaml');
    (doc.spec['disaggregation'] as { bootstrapPort: number }).bootstrapPort = 9000;
    const [prefill, decode] = buildDesired(parse(doc)).workloads;
    expect(container(prefill!).args).toEqual(
      expect.arrayContaining(['--disaggregation-bootstrap-port', '9000']),
    );
    expect(container(prefill!).ports).toContainEqual({
      name: 'bootstrap',
      containerPort: 9000,
      protocol: 'TCP',
    });
    expect(container(decode!).args).not.toContain('--disaggregation-bootstrap-port');
  });

  it('requests GPUs under the configured resource name, defaulting to the tensor-parallel size', () => {
    const doc = loadSample('deployment-hicache.yaml');
    const resources = doc.spec['resources'] as Record<string, unknown>;
    delete resources['gpus'];
    resources['gpuResourceName'] = 'amd.com/gpu';
    const [w] = buildDesired(parse(doc)).workloads;
    expect(container(w!).resources?.limits).toMatchObject({ 'amd.com/gpu': '2', memory: '256Gi' });
  });

  it('puts the fingerprint on the pod template, so an identity change rolls the pods', () => {
    const a = buildDesired(parse(loadSample('deployment-dense.yaml')));
    const doc = loadSample('deployment-dense.yaml');
    (doc.spec['runtime'] as { extraArgs?: string[] }).extraArgs = ['--log-level', 'debug'];
    const b = buildDesired(parse(doc));
    expect(a.fingerprint).not.toBe(b.fingerprint);
    const annotation = (d: typeof a) =>
      d.workloads[0]?.spec?.template.metadata?.annotations?.['cacheroute.dev/fingerprint'];
    expect(annotation(a)).toBe(a.fingerprint);
    expect(annotation(b)).toBe(b.fingerprint);
    expect(b.workloads[0]?.spec?.template.metadata?.labels?.['cacheroute.dev/fingerprint']).toBe(
      b.fingerprint,
    );
    // The selector must never carry the fingerprint: it is immutable on apps/v1 Deployments.
    expect(b.workloads[0]?.spec?.selector.matchLabels).not.toHaveProperty('cacheroute.dev/fingerprint');
  });

  it.each([
    ['replicas', (s: Record<string, unknown>) => (s['replicas'] = 7)],
    ['scheduling', (s: Record<string, unknown>) => (s['scheduling'] = { nodeSelector: { pool: 'b' } })],
  ])('keeps the fingerprint when only %s changes', (_what, mutate) => {
    const doc = loadSample('deployment-dense.yaml');
    const before = buildDesired(parse(doc)).fingerprint;
    mutate(doc.spec);
    expect(buildDesired(parse(doc)).fingerprint).toBe(before);
  });

  type DenseSpec = {
    runtime: { image: string; env?: { name: string; value: string }[] };
    model: { digest: string };
    serving: { pageSize: number };
  };
  it.each<[string, (s: DenseSpec) => void]>([
    ['image', (s) => (s.runtime.image = `lmsysorg/sglang@sha256:${'d'.repeat(64)}`)],
    ['model digest', (s) => (s.model.digest = `sha256:${'e'.repeat(64)}`)],
    ['page size', (s) => (s.serving.pageSize = 64)],
    ['environment', (s) => (s.runtime.env = [{ name: 'X', value: '1' }])],
  ])('changes the fingerprint when the %s changes', (_what, mutate) => {
    const doc = loadSample('deployment-dense.yaml');
    const before = buildDesired(parse(doc)).fingerprint;
    mutate(doc.spec as unknown as DenseSpec);
    expect(buildDesired(parse(doc)).fingerprint).not.toBe(before);
  });

  it('gives SGLang its API key from the Secret entry of its own fingerprint, last, and outside the fingerprint', () => {
    const doc = loadSample('deployment-dense.yaml');
    (doc.spec['runtime'] as { extraArgs?: string[] }).extraArgs = ['--log-level', 'debug'];
    const root = parse(doc);
    const d = buildDesired(root);
    const c = container(d.workloads[0]!);
    expect(c.env).toContainEqual({
      name: 'CACHEROUTE_RUNTIME_API_KEY',
      valueFrom: { secretKeyRef: { name: 'llama-8b-runtime-api-key', key: d.fingerprint } },
    });
    // After the user's extra arguments: argparse keeps the last occurrence.
    expect(c.args?.slice(-4)).toEqual(['--log-level', 'debug', '--api-key', '$(CACHEROUTE_RUNTIME_API_KEY)']);
    // The identity's material (buildArgv, what the fingerprint hashes) has no key: no cycle.
    expect(planRoles(root.spec).flatMap((e) => buildArgv(root.spec, e))).not.toContain('--api-key');
  });

  it('owns every object through a controller reference to the Deployment', () => {
    const d = buildDesired(parse(loadSample('deployment-dense.yaml')));
    for (const o of [...d.workloads, ...d.services]) {
      expect(o.metadata?.ownerReferences).toEqual([
        expect.objectContaining({
          kind: 'Deployment',
          apiVersion: 'cacheroute.dev/v1alpha1',
          uid: 'uid-1',
          controller: true,
        }),
      ]);
    }
  });
});

describe('computeDeclaredIdentity', () => {
  it('declares radix cache off on a HiSparse decode and on for a HiCache prefill', () => {
    const root = parse(loadSample('deployment-pd-hisparse.yaml'));
    const [prefill, decode] = planRoles(root.spec).map((e) => computeDeclaredIdentity(root.spec, e));
    expect(prefill).toMatchObject({
      disaggregationMode: 'prefill',
      hicache: true,
      hisparse: false,
      radixCache: true,
    });
    expect(decode).toMatchObject({
      disaggregationMode: 'decode',
      hicache: false,
      hisparse: true,
      radixCache: false,
    });
  });
});

describe('spec.serving.priorityScheduling', () => {
  const withPriority = (on: boolean | undefined): DeploymentResource => {
    const doc = loadSample('deployment-dense.yaml');
    doc.spec['serving'] = {
      ...(doc.spec['serving'] as object),
      ...(on === undefined ? {} : { priorityScheduling: on }),
    };
    return parse(doc);
  };

  it('renders --enable-priority-scheduling --disable-priority-preemption --default-priority-value 0, SGLang-checked, and declares it', () => {
    const root = withPriority(true);
    const [engine] = planRoles(root.spec);
    if (!engine) throw new Error('no engine');
    const argv = buildArgv(root.spec, engine);
    expect(argv).toEqual(
      expect.arrayContaining(['--enable-priority-scheduling', '--disable-priority-preemption']),
    );
    // SGLang's default sign (the larger first): the gateway's stamp is written for it.
    expect(argv).not.toContain('--schedule-low-priority-values-first');
    // An unstamped request (a probe's, a warm-up's, a Task's) ranks as a default tenant's long prompt.
    const at = argv.indexOf('--default-priority-value');
    expect(argv.slice(at, at + 2)).toEqual(['--default-priority-value', '0']);
    const parsed = parseSglangArgs(argv);
    if (!parsed.ok) throw new Error(parsed.error.message);
    expect(checkSglangArgs(parsed.value.args)).toEqual([]);
    expect(computeDeclaredIdentity(root.spec, engine).priorityScheduling).toBe(true);
  });

  it.each([false, undefined])('%s renders none of the flags and declares it off', (on) => {
    const root = withPriority(on);
    const [engine] = planRoles(root.spec);
    if (!engine) throw new Error('no engine');
    expect(buildArgv(root.spec, engine).filter((a) => a.includes('priority'))).toEqual([]);
    expect(computeDeclaredIdentity(root.spec, engine).priorityScheduling).toBe(false);
  });
});
