// Qualifications end to end: the full control plane, KWOK GPU nodes with an
// SGLang simulator on each pod IP, and the operator. A dense and a HiCache
// Deployment of one model are qualified against each other; every claim about
// what a runtime saw is read from the simulators' own counters and from the
// record the operator stored.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeploymentStatus, QualificationStatus } from '#api';
import { startOperator, type Operator } from '../../operator/src/operator.ts';
import {
  parseRecords,
  recordConfigMapName,
  type SampleRecord,
} from '../../operator/src/controllers/qualification/record.ts';
import { createLogger } from '#kube/logger.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { eventually, kubectlOk, listEvents } from '../support/kubectl.ts';
import { REPO_ROOT } from '../support/samples.ts';
import { startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';
import { startChromium, type Chromium } from '../support/chromium.ts';
import { startInProcessGateway, type InProcessGateway } from '../support/gateway.ts';

const NS = 'e2e-qualification';
const QUALS = 'qualifications.cacheroute.dev';
let cp: ControlPlane;
let kubelet: SimKubelet;
let operator: Operator;
let gateway: InProcessGateway | undefined;
let chromium: Chromium | undefined;

async function k(args: string[], input?: string): Promise<string> {
  return kubectlOk(['-n', NS, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });
}

async function create(manifest: unknown): Promise<void> {
  await k(['create', '-f', '-'], JSON.stringify(manifest));
}

async function getJson<T>(resource: string, name: string): Promise<T> {
  return JSON.parse(await k(['get', resource, name, '-o', 'json'])) as T;
}

const qualStatus = async (name: string): Promise<QualificationStatus> =>
  (await getJson<{ status?: QualificationStatus }>(QUALS, name)).status ?? {};

async function waitForPhase(name: string, phase: QualificationStatus['phase'], timeoutMs = 120_000) {
  return eventually(
    async () => {
      const s = await qualStatus(name);
      expect(s.phase).toBe(phase);
      return s;
    },
    { timeoutMs },
  );
}

/** Requests the simulators of one part (prefill or decode) of a Deployment served. */
function requestsServedBy(deployment: string, part: string): number {
  let n = 0;
  for (const sim of kubelet.sims.values())
    if (sim.pod.startsWith(`${deployment}-`) && sim.pod.includes(part))
      n += sim.server.engine.counters.requests;
  return n;
}

/** Requests the simulators of one Deployment's pods served. */
function requestsServed(deployment: string): number {
  let n = 0;
  for (const sim of kubelet.sims.values())
    if (sim.pod.startsWith(`${deployment}-`)) n += sim.server.engine.counters.requests;
  return n;
}

async function waitForRoutable(name: string): Promise<void> {
  await eventually(
    async () => {
      const s = (await getJson<{ status?: DeploymentStatus }>('sgd', name)).status ?? {};
      expect(s.routable?.value).toBe(true);
      expect(s.endpoints?.every((e) => e.verified && e.fingerprint === s.identity?.fingerprint)).toBe(true);
    },
    { timeoutMs: 90_000 },
  );
}

const deployment = (name: string, spec: Record<string, unknown>) =>
  buildDeploymentManifest({ name, replicas: 1, spec: { deploymentId: `${name}-r1`, ...spec } });

function qualification(name: string, arms: [string, string], spec: Record<string, unknown> = {}) {
  return {
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Qualification',
    metadata: { name },
    spec: {
      arms: [
        { name: arms[0], deployment: { name: arms[0] } },
        { name: arms[1], deployment: { name: arms[1] } },
      ],
      workload: {
        generator: {
          seed: 11,
          sharedPrefix: { conversations: 2, turns: 2, systemPromptWords: 300, turnWords: 20 },
          documents: { documents: 1, documentWords: 600, questionsPerDocument: 3, questionWords: 8 },
        },
      },
      maxOutputTokens: 4,
      concurrency: 2,
      samplesPerArm: 2,
      budget: { maxDurationSeconds: 600 },
      pricePerGpuHour: '2.50',
      ...spec,
    },
  };
}

/** Each cold pass starts from nothing cached; its warm pass repeats it and finds every prompt cached. */
function expectColdThenWarm(records: readonly SampleRecord[]): void {
  for (const r of records) {
    // Each prefix's first request in a cold pass shares nothing with anything sent before. With
    // concurrency 2 the first two of a group are in flight together, and either may be served
    // first (the other then finds the shared prefix): the smaller of the two is 0.
    const cached = (ids: string[]) =>
      Math.min(
        ...(r.cold?.requests.filter((q) => ids.includes(q.id)).map((q) => q.cachedTokens ?? -1) ?? []),
      );
    expect(cached(['conv-0-turn-0', 'conv-1-turn-0'])).toBe(0);
    expect(cached(['doc-0-q-0', 'doc-0-q-1'])).toBe(0);
    expect(r.warm?.requests.map((q) => q.id)).toEqual(r.cold?.requests.map((q) => q.id));
    for (const q of r.warm?.requests ?? []) expect(q.cachedTokens).toBeGreaterThan(0);
  }
}

beforeAll(async () => {
  cp = await startControlPlane({ full: true, gpuNodes: 1 });
  await kubectlOk(['apply', '--server-side', '-f', join(REPO_ROOT, 'crds')], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(REPO_ROOT, 'crds')], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  kubelet = await startSimKubelet({ kubeconfig: cp.kubeconfig });
  operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({
      level: 'info',
      fields: { component: 'operator' },
      write: (line) => {
        if (/"level":"(warn|error)"/.test(line)) process.stderr.write(line);
      },
    }),
    leaderElection: { namespace: NS, name: 'cacheroute-operator' },
    http: { host: '127.0.0.1', port: 0 },
  });
  await create(deployment('dense', { profile: 'dense' }));
  await create(deployment('hicache', { profile: 'hicache', hicache: { ratio: 2 } }));
  await Promise.all([waitForRoutable('dense'), waitForRoutable('hicache')]);
}, 180_000);

afterAll(async () => {
  await chromium?.stop();
  await gateway?.stop();
  await operator?.stop();
  await kubelet?.stop();
  await cp?.stop();
});

describe('Qualification', () => {
  it('refuses a pair that differs outside its subject before any traffic, naming the difference', async () => {
    const other = deployment('other-model', { profile: 'hicache', hicache: { ratio: 2 } });
    (other.spec['model'] as Record<string, unknown>)['digest'] = `sha256:${'a'.repeat(64)}`;
    await create(other);
    const before = requestsServed('dense') + requestsServed('other-model');
    await create(qualification('mismatched', ['dense', 'other-model']));
    const s = await waitForPhase('mismatched', 'Refused');
    const accepted = s.conditions?.find((c) => c.type === 'Accepted');
    expect(accepted).toMatchObject({ status: 'False', reason: 'ArmsMismatch' });
    expect(accepted?.message).toContain(
      `model.digest: dense="sha256:c2737007464e9fb39f60e0beec1ddb1d7092648149ebe430358ad617b665655e" other-model="sha256:${'a'.repeat(64)}"`,
    );
    await eventually(async () => {
      const e = await listEvents(cp.kubeconfig, NS, 'mismatched');
      expect(e.map((x) => x.reason)).toContain('ArmsMismatch');
    });
    expect(requestsServed('dense') + requestsServed('other-model')).toBe(before);
  });

  it('qualifies dense against HiCache: cold samples see nothing cached, warm ones their repeat', async () => {
    await create(qualification('dense-vs-hicache', ['dense', 'hicache']));
    const s = await waitForPhase('dense-vs-hicache', 'Succeeded', 180_000);
    expect(s).toMatchObject({ progress: '4/4', evidence: 'Simulator' });
    expect(s.conditions?.find((c) => c.type === 'Complete')).toMatchObject({
      status: 'True',
      reason: 'Completed',
    });
    const [dense, hicache] = s.arms ?? [];
    for (const arm of [dense, hicache]) {
      expect(arm).toMatchObject({ samplesDone: 2, samplesFailed: 0, progress: '2/2' });
      expect(arm?.cold?.requests).toBe(2 * 7);
      expect(arm?.warm?.cachedShare).toBeGreaterThan(arm?.cold?.cachedShare ?? 1);
      expect(arm?.warm?.ttftMs?.p50).toBeTypeOf('number');
      expect(Number(arm?.cost)).toBeGreaterThan(0);
    }
    expect(s.verdict).toMatchObject({ metric: 'TTFT', pass: 'Warm', confidence: 0.95 });

    // The full record: arms alternate, each sample in a salt of its own.
    const cm = await getJson<{ data?: Record<string, string> }>(
      'configmap',
      recordConfigMapName('dense-vs-hicache'),
    );
    const { records, invalid } = parseRecords(cm.data);
    expect(invalid).toEqual([]);
    expect(records.map((r) => r.arm)).toEqual(['dense', 'hicache', 'hicache', 'dense']);
    expect(new Set(records.map((r) => r.salt)).size).toBe(4);
    expectColdThenWarm(records);
    // Each arm's own simulator served its samples: 2 samples x 2 passes x 7 requests.
    expect(requestsServed('dense')).toBe(28);
    expect(requestsServed('hicache')).toBe(28);
    const table = await k(['get', 'qual', 'dense-vs-hicache']);
    expect(table).toMatch(/dense-vs-hicache\s+Succeeded\s+dense\s+hicache\s+4\/4\s+Simulator/);
  });

  it("plots the runs on the gateway's status page, in Chromium, from the Qualifications' status", async () => {
    // Run after the two tests above: `mismatched` (Refused, no sample) and `dense-vs-hicache`.
    const s = await qualStatus('dense-vs-hicache');
    expect(s.phase).toBe('Succeeded');
    gateway = await startInProcessGateway(cp.kubeconfig, [NS], { listen: true, qualifications: true });
    chromium = await startChromium();
    const page = await chromium.newPage();
    await page.goto(`${gateway.url ?? ''}/status`);
    const section = `section[data-qualification="${NS}/dense-vs-hicache"]`;
    // The watcher lists once; the page's own refresh brings the section in.
    await eventually(
      async () => expect(await page.evaluate<boolean>(`!!document.querySelector('${section}')`)).toBe(true),
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    // Every latency plot: one curve an arm and pass, through every stored quantile, drawn with
    // a real extent, and the arms named in its legend.
    for (const plot of ['ttft', 'itl', 'e2e']) {
      const curves = await page.evaluate<
        { arm: string; pass: string; points: number; w: number; h: number }[]
      >(
        `[...document.querySelectorAll('${section} figure[data-plot="${plot}"] polyline')].map((p) => {
           const b = p.getBBox();
           return { arm: p.dataset.arm, pass: p.dataset.pass, points: p.points.numberOfItems, w: b.width, h: b.height };
         })`,
      );
      expect(curves.map((c) => `${c.arm} ${c.pass}`).sort()).toEqual([
        'dense cold',
        'dense warm',
        'hicache cold',
        'hicache warm',
      ]);
      for (const c of curves) {
        expect(c.points, `${plot} ${c.arm} ${c.pass}`).toBe(21);
        expect(c.h, `${plot} ${c.arm} ${c.pass} spans the quantiles`).toBeGreaterThan(100);
      }
      const legend = await page.evaluate<string>(
        `document.querySelector('${section} figure[data-plot="${plot}"] svg').textContent`,
      );
      expect(legend).toContain('dense warm');
      expect(legend).toContain('hicache cold');
    }
    // The cached-token share: a point a sample and pass, each warm one above its cold one.
    const points = await page.evaluate<
      { arm: string; pass: string; sample: string; cy: number; r: number }[]
    >(
      `[...document.querySelectorAll('${section} figure[data-plot="cached-share"] circle')].map((c) => ({
         arm: c.dataset.arm, pass: c.dataset.pass, sample: c.dataset.sample,
         cy: c.getBoundingClientRect().top, r: c.getBoundingClientRect().width,
       }))`,
    );
    expect(points).toHaveLength(2 * 2 * 2);
    for (const p of points) expect(p.r).toBeGreaterThan(0);
    for (const arm of ['dense', 'hicache'])
      for (const sample of ['1', '2']) {
        const at = (pass: string) =>
          points.find((p) => p.arm === arm && p.sample === sample && p.pass === pass);
        expect(at('warm')?.cy, `${arm} sample ${sample}: warm share above cold`).toBeLessThan(
          at('cold')?.cy ?? 0,
        );
      }
    expect(
      await page.evaluate<string>(`document.querySelector('${section} [data-field="evidence"]').textContent`),
    ).toBe('Simulator');
    // The refused run has nothing to plot, and says so instead of drawing empty axes.
    const refused = `section[data-qualification="${NS}/mismatched"]`;
    expect(await page.evaluate<number>(`document.querySelectorAll('${refused} svg').length`)).toBe(0);
    expect(
      await page.evaluate<boolean>(`!!document.querySelector('${refused} [data-field="no-samples"]')`),
    ).toBe(true);
    expect(page.errors).toEqual([]); // no script error, no CSP violation
    const shot = process.env['CACHEROUTE_QUALIFICATION_SCREENSHOT'] ?? join(chromium.dir, 'status.png');
    await page.screenshot(shot, { fullPage: true });
    await page.close();
  });

  it('runs an open loop: requests sent on one Poisson schedule in every pass of both arms', async () => {
    const spec = qualification('open-loop', ['dense', 'hicache'], {
      samplesPerArm: 1,
      workload: {
        generator: {
          seed: 3,
          documents: { documents: 1, documentWords: 300, questionsPerDocument: 4, questionWords: 6 },
        },
        requestRate: { requestsPerSecond: 50, seed: 2 },
      },
    });
    delete (spec.spec as { concurrency?: number }).concurrency;
    await create(spec);
    const s = await waitForPhase('open-loop', 'Succeeded');
    expect(s.arms?.map((a) => a.progress)).toEqual(['1/1', '1/1']);
    const cm = await getJson<{ data?: Record<string, string> }>(
      'configmap',
      recordConfigMapName('open-loop'),
    );
    const { records } = parseRecords(cm.data);
    expect(records).toHaveLength(2);
    // Every pass sent its requests in order, each no earlier than the one before; the schedule
    // is the operator's, so the four passes kept the same order of sends.
    for (const r of records)
      for (const pass of [r.cold, r.warm]) {
        const sent = pass?.requests.map((q) => q.sentAtMs ?? -1) ?? [];
        expect(sent).toHaveLength(4);
        expect(sent.every((t) => t >= 0)).toBe(true);
        expect([...sent].sort((a, b) => a - b)).toEqual(sent);
        expect(pass?.requests.every((q) => q.ok)).toBe(true);
      }
    expect(s.arms?.every((a) => (a.warm?.cachedShare ?? 0) > (a.cold?.cachedShare ?? 1))).toBe(true);
    // A manifest with both a concurrency and a rate is refused at apply, naming both.
    const both = qualification('both', ['dense', 'hicache'], {
      workload: spec.spec.workload,
    });
    await expect(create(both)).rejects.toThrow(/exactly one of spec.concurrency/);
  });

  it('qualifies two prefill/decode Deployments, each request sent to its pair with one room', async () => {
    // Dense against HiCache on the prefill part: the parts' profiles are the subject.
    const pd = (name: string, prefill: Record<string, unknown>) => {
      const m = deployment(name, {
        disaggregation: { transferBackend: 'mooncake', prefill, decode: { replicas: 1 } },
      });
      for (const k of ['replicas', 'profile', 'radixCache', 'hicache', 'hisparse']) delete m.spec[k];
      return m;
    };
    await create(pd('pd-dense', { replicas: 1, profile: 'dense' }));
    await create(pd('pd-hicache', { replicas: 1, profile: 'hicache', hicache: { ratio: 2 } }));
    await Promise.all([waitForRoutable('pd-dense'), waitForRoutable('pd-hicache')]);
    await create(qualification('pd', ['pd-dense', 'pd-hicache'], { samplesPerArm: 1 }));
    const s = await waitForPhase('pd', 'Succeeded');
    expect(s.evidence).toBe('Simulator');
    const cm = await getJson<{ data?: Record<string, string> }>('configmap', recordConfigMapName('pd'));
    const { records } = parseRecords(cm.data);
    expect(records).toHaveLength(2);
    for (const r of records) {
      // The decode measured, paired with its own prefill: both pods of the arm's Deployment.
      expect(r.pod).toMatch(new RegExp(`^${r.arm === 'pd-dense' ? 'pd-dense' : 'pd-hicache'}-.*decode`));
      expect(r.prefillPod).toMatch(
        new RegExp(`^${r.arm === 'pd-dense' ? 'pd-dense' : 'pd-hicache'}-.*prefill`),
      );
      expect([...(r.cold?.requests ?? []), ...(r.warm?.requests ?? [])].every((q) => q.ok)).toBe(true);
    }
    expectColdThenWarm(records);
    // Each part's simulators served every request of its arm: 1 sample x 2 passes x 7 requests.
    for (const name of ['pd-dense', 'pd-hicache']) {
      expect(requestsServedBy(name, 'prefill')).toBe(14);
      expect(requestsServedBy(name, 'decode')).toBe(14);
    }
  });

  it('replays a Mooncake trace from a ConfigMap: lines sharing hash ids share their prefix', async () => {
    const trace = [
      { timestamp: 0, input_length: 300, output_length: 4, hash_ids: [1, 2, 3] },
      { timestamp: 5, input_length: 250, output_length: 4, hash_ids: [1, 2, 4] },
      { timestamp: 9, input_length: 120, output_length: 4, hash_ids: [5] },
    ]
      .map((l) => JSON.stringify(l))
      .join('\n');
    await create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'trace' },
      data: { 'trace.jsonl': trace },
    });
    await create(
      qualification('from-trace', ['dense', 'hicache'], {
        workload: { trace: { configMapRef: { name: 'trace', key: 'trace.jsonl' }, blockWords: 100 } },
        samplesPerArm: 1,
        // One at a time: the second line must find the first's blocks already cached.
        concurrency: 1,
      }),
    );
    const s = await waitForPhase('from-trace', 'Succeeded');
    const cm = await getJson<{ data?: Record<string, string> }>(
      'configmap',
      recordConfigMapName('from-trace'),
    );
    const { records } = parseRecords(cm.data);
    expect(records).toHaveLength(2);
    for (const r of records) {
      const [first, second, third] = r.cold?.requests ?? [];
      expect(first?.cachedTokens).toBe(0);
      // Blocks 1 and 2 (200 words) again: cached; block 5 is new.
      expect(second?.cachedTokens).toBeGreaterThan(0);
      expect(third?.cachedTokens).toBe(0);
    }
    expect(s.arms?.every((a) => (a.warm?.cachedShare ?? 0) > (a.cold?.cachedShare ?? 1))).toBe(true);
  });
});
