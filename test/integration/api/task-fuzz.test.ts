// Bad Task specs never hurt (fast-check, fixed seed): the two sample Tasks with
// one to three fields given wrong, edge or hostile values, sent to the real API
// server. It refuses a Task with a 4xx and a message, or accepts it; the zod
// mirror of its rules (ADR 0002) agrees either way; and an accepted Task, driven
// through planTaskStep as the reconciler drives it (each step's status written
// through the status subresource, outcomes fed back), never makes it throw, never
// produces a status the API server refuses, and ends Failed only with the
// Failed condition and a reason. Prints one JSON line.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { validateResource, type TaskResource } from '#api';
import { planTaskStep, type TaskObservations } from '../../../operator/src/controllers/task/phase.ts';
import { computeTaskTarget, type TaskTarget } from '../../../operator/src/controllers/task/attempt/target.ts';
import type { AttemptOutcome } from '../../../operator/src/controllers/task/attempt/types.ts';
import { ApiError, KubeClient } from '#kube/client.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { writeStatusIfChanged } from '../../../operator/src/manager/status.ts';
import { kubectl, kubectlOk } from '../../support/kubectl.ts';
import { loadSample, REPO_ROOT } from '../../support/samples.ts';

const SEED = 20261201;
const CASES = 300;
const kubeconfig = inject('kubeconfig');
const NS = `task-fuzz-${process.pid}`;
let client: KubeClient;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
/** A field taken out, or given a value. */
type Change = 'remove' | { readonly set: Json };

/** Spec fields of the two samples (and a few the samples leave out), as paths. */
const FIELDS: readonly (readonly string[])[] = [
  ['target'],
  ['target', 'deployment'],
  ['target', 'deployment', 'name'],
  ['target', 'openrouter', 'model'],
  ['target', 'openrouter', 'upstreamProvider'],
  ['target', 'openrouter', 'inputTokenUpperBound'],
  ['target', 'openrouter', 'cacheWriteUsage'],
  ['target', 'openrouter', 'apiKeySecretRef', 'name'],
  ['target', 'openrouter', 'apiKeySecretRef', 'key'],
  ['input'],
  ['input', 'prompt'],
  ['input', 'messages'],
  ['input', 'messages', '0', 'role'],
  ['input', 'messages', '0', 'content'],
  ['input', 'configMapRef'],
  ['input', 'configMapRef', 'name'],
  ['input', 'configMapRef', 'key'],
  ['sampling'],
  ['sampling', 'temperature'],
  ['sampling', 'topP'],
  ['sampling', 'topK'],
  ['sampling', 'seed'],
  ['sampling', 'stop'],
  ['maxOutputTokens'],
  ['budget'],
  ['budget', 'maxInputTokens'],
  ['budget', 'maxOutputTokens'],
  ['budget', 'prices'],
  ['budget', 'prices', 'inputPerMillion'],
  ['budget', 'prices', 'outputPerMillion'],
  ['budget', 'maxCost'],
  ['budget', 'currency'],
  ['checks'],
  ['checks', '0'],
  ['checks', '0', 'name'],
  ['checks', '0', 'type'],
  ['checks', '0', 'pattern'],
  ['checks', '0', 'schema'],
  ['checks', '0', 'min'],
  ['checks', '0', 'max'],
  ['checks', '1'],
  ['checkRetries'],
  ['reuse', 'enabled'],
  ['reuse', 'ttlSeconds'],
  ['reuse', 'onInFlight'],
  ['review', 'required'],
  ['review', 'decision'],
  ['review', 'feedback'],
  ['x-unknown'],
];

const deepSchema = `${'{"items":'.repeat(5_000)}{}${'}'.repeat(5_000)}`;
const long = (n: number): string => 'a'.repeat(n);

/** Values at the edges of the rules, of the wrong type, or built to hurt. */
const value: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>(
    null,
    true,
    false,
    0,
    -1,
    1,
    0.5,
    2,
    2.0001,
    5,
    6,
    256,
    257,
    31_536_000,
    31_536_001,
    2 ** 53,
    1e308,
    -1e308,
    '',
    'x',
    'Rework',
    'Accepted',
    'Regex',
    'Length',
    'JSONSchema',
    'Wait',
    'Fail',
    'USD',
    'usd',
    '0.01',
    '-1',
    '1e3',
    'required',
    'not_applicable',
    'llama-8b',
    'UPPER_case',
    '(',
    '^(bug|feature|question)$',
    '{"type":"object"}',
    '{"type":"string","maxLength":3}',
    '{"$ref":"#"}',
    'not json',
    deepSchema,
    [],
    {},
    [{}],
    ['a'],
    [{ role: 'user', content: 'x' }],
    { name: 'n', type: 'Length', min: 1 },
    { name: 'n', type: 'Regex', pattern: '(' },
    { name: 'n', type: 'JSONSchema', schema: deepSchema },
    { deployment: { name: 'llama-8b' }, openrouter: { model: 'm' } },
    { prompt: 'x', configMapRef: { name: 'c', key: 'k' } },
  ),
  fc.constantFrom(253, 254, 4_096, 4_097, 16_384, 16_385, 65_536, 65_537, 262_144, 262_145).map(long),
  fc.integer().map((n) => n as Json),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => n as Json),
  fc.string({ unit: 'grapheme', maxLength: 30 }).map((s) => s as Json),
  fc
    .integer({ min: 0, max: 300 })
    .map((n) => Array.from({ length: n }, (_, i): Json => ({ role: 'user', content: `m${i}` }))),
  fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>,
);

/** Values of the right type and in range for many fields: the Task gets past the API server and runs. */
const plausible: fc.Arbitrary<Json> = fc.oneof(
  fc.integer({ min: 1, max: 4_096 }).map((n) => n as Json),
  fc.constantFrom<Json>(0, 1, 0.7, 'llama-8b', 'k', 'a-b', 'Say hi.', 'USD', '0.5', true, false),
  fc.constantFrom<Json>(
    { name: 'len', type: 'Length', min: 1, max: 50 },
    { name: 'json', type: 'JSONSchema', schema: '{"type":"object","required":["a"]}' },
    { name: 'rx', type: 'Regex', pattern: '^[a-z]+$' },
    [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ],
  ),
);

interface TaskCase {
  readonly sample: 'task-sglang.yaml' | 'task-openrouter.yaml';
  readonly changes: readonly { readonly path: readonly string[]; readonly change: Change }[];
  /** Observations: the target routable (else the task is an hour old and its target is gone). */
  readonly routable: boolean;
  /** What each generation returns: this text, or (null) a provider error. */
  readonly output: string | null;
}

const taskCase: fc.Arbitrary<TaskCase> = fc.record({
  sample: fc.constantFrom<TaskCase['sample']>('task-sglang.yaml', 'task-openrouter.yaml'),
  changes: fc.array(
    fc.record({
      path: fc.constantFrom(...FIELDS),
      change: fc.oneof(
        { weight: 1, arbitrary: fc.constant<Change>('remove') },
        { weight: 3, arbitrary: plausible.map((set): Change => ({ set })) },
        { weight: 4, arbitrary: value.map((set): Change => ({ set })) },
      ),
    }),
    { minLength: 0, maxLength: 3 },
  ),
  routable: fc.boolean(),
  output: fc.constantFrom('bug', '', 'a'.repeat(300), '{"a":1}', '[[[[[]]]]]', 'not json', null),
});

function setPath(root: Json, path: readonly string[], to: Change): Json {
  const [head, ...rest] = path;
  if (head === undefined) return to === 'remove' ? null : to.set;
  const obj: Record<string, Json> =
    root !== null && typeof root === 'object' && !Array.isArray(root) ? { ...root } : {};
  const index = Number(head);
  if (Array.isArray(root) && Number.isInteger(index)) {
    const out = [...root];
    if (rest.length === 0 && to === 'remove') out.splice(index, 1);
    else out[index] = setPath(out[index] ?? {}, rest, to);
    return out.map((x) => x ?? null);
  }
  if (rest.length === 0 && to === 'remove') delete obj[head];
  else obj[head] = setPath(obj[head] ?? {}, rest, to);
  return obj;
}

function buildManifest(c: TaskCase, name: string): KubeObject {
  const sample = loadSample(c.sample) as unknown as { spec: Json };
  let spec: Json = sample.spec;
  for (const { path, change } of c.changes) spec = setPath(spec, path, change);
  return {
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Task',
    metadata: { name, namespace: NS },
    spec,
  };
}

function describeCase(c: TaskCase): string {
  return JSON.stringify(c, (_k, v: unknown) =>
    typeof v === 'string' && v.length > 60 ? `<${v.length} chars>` : v,
  );
}

const SGLANG_TARGET: TaskTarget = {
  provider: 'sglang',
  identity: {
    provider: 'sglang',
    deploymentId: 'llama-3-1-8b-instruct-r1',
    identityFingerprint: 'f1',
    cacheSalt: 'salt',
    runtime: {
      modelPath: 'm',
      servedModelName: 'llama-8b',
      tokenizerPath: 'm',
      version: '0.5.23',
      tensorParallel: 1,
    },
  },
  route: { kind: 'standalone', urls: ['http://10.0.0.1:30000'] },
};

function outcomeOf(c: TaskCase): AttemptOutcome {
  if (c.output === null)
    return { ok: false, error: { reason: 'ProviderError', code: 'HTTP500', message: 'the runtime failed' } };
  const completion = [...c.output].length;
  return {
    ok: true,
    value: {
      text: c.output,
      inputTokens: 40,
      usage: { promptTokens: 40, completionTokens: completion, cachedTokens: 0 },
    },
  };
}

const summary = {
  seed: SEED,
  cases: 0,
  refused: {} as Record<string, number>,
  accepted: 0,
  finalPhases: {} as Record<string, number>,
  failedReasons: {} as Record<string, number>,
  statusWrites: 0,
};
const count = (into: Record<string, number>, key: string): void => void (into[key] = (into[key] ?? 0) + 1);

/** Plays the reconciler for an accepted Task: plan, write status, feed outcomes and reads; returns the last object. */
async function drive(created: KubeObject, c: TaskCase): Promise<TaskResource> {
  let obj = created;
  let extra: Partial<TaskObservations> = {};
  const now = c.routable ? new Date() : new Date(Date.now() + 3_600_000);
  let lastText: string | undefined;
  let task: TaskResource | undefined;
  for (let i = 0; i < 12; i++) {
    const parsed = validateResource(obj);
    expect(parsed.ok, `the API server kept a Task zod refuses: ${JSON.stringify(parsed)}`).toBe(true);
    task = (parsed as { value: TaskResource }).value;
    const target = c.routable
      ? task.spec.target.openrouter
        ? computeTaskTarget(task.spec, { openrouterBaseUrl: 'https://openrouter.example/api/v1' })
        : { ok: true as const, value: SGLANG_TARGET }
      : computeTaskTarget(task.spec, {});
    const step = planTaskStep(task, { target, inputText: 'from the ConfigMap', ...extra }, now);
    const written = await writeStatusIfChanged(client, Resources.tasks, obj, step.status);
    if (written.written) summary.statusWrites++;
    obj = written.object;
    extra = {};
    const gen = step.actions.find((a) => a.type === 'generate');
    if (gen) {
      const outcome = outcomeOf(c);
      if (outcome.ok) lastText = outcome.value.text;
      extra = { outcome };
      continue;
    }
    if (step.actions.some((a) => a.type === 'readResult')) {
      extra = { resultText: lastText };
      continue;
    }
    if (!step.actions.some((a) => a.type === 'requeue' && a.afterMs === 0)) break;
  }
  const parsed = validateResource(obj);
  return parsed.ok ? (parsed.value as TaskResource) : (task as TaskResource);
}

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig });
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  client = await KubeClient.fromKubeConfig(kc);
});

afterAll(async () => {
  await client.close();
  await kubectl(['delete', 'namespace', NS, '--wait=false'], { kubeconfig });
  console.log(JSON.stringify({ fuzz: 'task-specs', ...summary }));
});

describe('bad Task specs never hurt', () => {
  // Found by this fuzzing: the CRD left out the ±2^53 bounds zod puts on every .int(), so the
  // API server kept `topK: 2^60`, zod refused it, and the reconciler stopped on InvalidSpec
  // without a status. The CRD carries the bounds now (lib/api/openapi.ts).
  it('an integer past 2^53 is refused by the API server, as zod refuses it', async () => {
    const manifest = buildManifest(
      {
        sample: 'task-sglang.yaml',
        changes: [{ path: ['sampling', 'topK'], change: { set: 2 ** 60 } }],
        routable: true,
        output: '',
      },
      'fuzz-unsafe-int',
    );
    expect(validateResource(manifest).ok).toBe(false);
    await expect(client.create(Resources.tasks, manifest, { dryRun: true })).rejects.toMatchObject({
      code: 422,
    });
  });

  it(`${CASES} mutated Tasks: refused with a 4xx and a message, or accepted and planned to an end`, async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(taskCase, async (c) => {
        summary.cases++;
        const manifest = buildManifest(c, `fuzz-${n++}`);
        const submitted = validateResource(manifest);
        let created: KubeObject;
        try {
          created = await client.create(Resources.tasks, manifest);
        } catch (e) {
          if (!(e instanceof ApiError)) throw e;
          count(summary.refused, String(e.code));
          expect(e.code, e.message).toBeGreaterThanOrEqual(400);
          expect(e.code, e.message).toBeLessThan(500);
          expect(e.status?.message ?? '').not.toBe('');
          // The mirror refuses what the API server refuses (metadata.name aside: no field is fuzzed there).
          expect(submitted.ok, `zod accepts what the API server refused: ${e.message}`).toBe(false);
          return;
        }
        summary.accepted++;
        // What the reconciler reads is the stored object: the API server prunes nulls and defaults.
        const stored = validateResource(created);
        expect(stored.ok, `zod refuses what the API server accepted: ${JSON.stringify(stored)}`).toBe(true);
        const task = await drive(created, c);
        const phase = task.status?.phase ?? 'Pending';
        count(summary.finalPhases, phase);
        if (phase === 'Failed') {
          const failed = task.status?.conditions?.find((x) => x.type === 'Failed');
          expect(failed).toMatchObject({ status: 'True', reason: expect.stringMatching(/^[A-Za-z]/) });
          count(summary.failedReasons, failed?.reason ?? '');
        }
      }),
      {
        seed: SEED,
        numRuns: CASES,
        endOnFailure: true,
        reporter: (d) => {
          if (!d.failed) return;
          const c = d.counterexample?.[0];
          throw new Error(`seed ${d.seed}: ${c ? describeCase(c) : '?'}\n${String(d.errorInstance)}`, {
            cause: d.errorInstance,
          });
        },
      },
    );
  });
});
