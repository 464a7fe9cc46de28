// `kit serve`: the real SGLang 0.5.23 server started from the arguments the
// operator renders for a Deployment's pod, with only what a CPU forces changed.
// The operator's own identity read-back (operator/src/sglang-client/identity.ts) then
// finds the runtime it declared, except for the one thing a CPU cannot give:
// tensor parallelism (serve.py runs tp 1).

import { lstatSync, mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateResource } from '#api';
import { buildArgv, computeDeclaredIdentity } from '../../operator/src/controllers/deployment/args.ts';
import { MODEL_DIR } from '../../operator/src/controllers/deployment/model-cache/names.ts';
import { planRoles } from '../../operator/src/controllers/deployment/roles.ts';
import {
  ModelInfo,
  ServerInfo,
  compareIdentity,
  computeRuntimeIdentity,
  type RuntimeIdentity,
} from '../../operator/src/sglang-client/identity.ts';
import { parseRuntimeMetrics } from '../../gateway/src/endpoints/runtime-load.ts';
import { stampRuntimePriority } from '../../gateway/src/picker/runtime-priority.ts';
import { buildTestEndpoint } from '../support/gateway/routes.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { isPidAlive } from '../support/processes.ts';
import { listDescendants, startRealSglang, type RealSglang } from '../support/real-sglang.ts';
import { runKit } from '../support/sglang-kit.ts';

const TENSOR_2 = { parallelism: { tensor: 2 }, resources: { gpus: 2 } };

/** The pod's arguments and declared identity of the dense sample with `overrides` (default: at tensor parallelism 2). */
function renderPod(
  modelDir: string,
  overrides: Record<string, unknown> = TENSOR_2,
): { argv: string[]; declared: RuntimeIdentity } {
  const manifest = buildDeploymentManifest({ spec: overrides });
  const r = validateResource(manifest);
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error(JSON.stringify(r));
  const spec = r.value.spec;
  const engine = planRoles(spec)[0];
  if (!engine) throw new Error('no engine');
  // The pod mounts the model at /models; here the declared path is a fresh
  // temp path (serve links the tiny model there, and never writes /models).
  const argv = buildArgv(spec, engine).map((a) => (a === MODEL_DIR ? modelDir : a));
  const declared = computeDeclaredIdentity(spec, engine);
  const swap = (p: string): string => (p === MODEL_DIR ? modelDir : p);
  return {
    argv: argv.filter(
      (a, i) => !['--host', '--port'].includes(a) && !['--host', '--port'].includes(argv[i - 1] ?? ''),
    ),
    declared: {
      ...declared,
      modelPath: swap(declared.modelPath),
      tokenizerPath: swap(declared.tokenizerPath),
    },
  };
}

/**
 * The real server of the dense sample's pod (with `overrides`) for the enclosing describe:
 * started before its tests, stopped (and its model link removed) after them.
 */
function servePod(overrides?: Record<string, unknown>): {
  modelDir: string;
  pod: { argv: string[]; declared: RuntimeIdentity };
  held: { server?: RealSglang };
} {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-serve-'));
  const modelDir = join(dir, 'models');
  const pod = renderPod(modelDir, overrides);
  const held: { server?: RealSglang } = {};
  beforeAll(async () => {
    held.server = await startRealSglang({ args: pod.argv });
  });
  afterAll(async () => {
    await held.server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return { modelDir, pod, held };
}

describe('kit serve: a pod of the dense sample on the real server', () => {
  const { modelDir, pod, held } = servePod();

  it('loads the tiny model from the declared path, a link serve made', () => {
    expect(lstatSync(modelDir).isSymbolicLink()).toBe(true);
    expect(basename(readlinkSync(modelDir))).toBe('tiny-llama');
  });

  it("passes the operator's identity check but for tensor parallelism, which a CPU forces to 1", async () => {
    const url = held.server?.url ?? '';
    const info = ServerInfo.parse(await (await fetch(`${url}/server_info`)).json());
    const model = ModelInfo.parse(await (await fetch(`${url}/model_info`)).json());
    const reported = computeRuntimeIdentity(info, model);
    expect(reported).toMatchObject({ modelPath: modelDir, servedModelName: 'llama-8b', version: '0.5.23' });
    expect(compareIdentity(pod.declared, reported)).toEqual([
      { field: 'tensorParallel', declared: 2, reported: 1 },
    ]);
    // What the pod asked for and serve passed through unchanged.
    expect(info).toMatchObject({ page_size: 16, max_running_requests: 256, enable_cache_report: true });
  });

  // A kubelet sends SIGKILL once the grace period is over: the server must end its tree on SIGTERM.
  it('stops its whole process tree on SIGTERM, before the SIGKILL that follows the grace', async () => {
    const s = held.server;
    if (!s) throw new Error('no server');
    const tree = [s.pid, ...listDescendants(s.pid)];
    expect(tree.length).toBeGreaterThanOrEqual(3); // main, scheduler, detokenizer
    expect(await s.stop()).toBe('exited');
    expect(tree.filter(isPidAlive)).toEqual([]);
  });
});

// spec.serving.priorityScheduling (ADR 0057): the real server takes the flags the operator renders,
// reports them as the operator verifies them, and serves the body the gateway stamps on every route.
describe('kit serve: a pod of the dense sample with priority scheduling on', () => {
  const sample = buildDeploymentManifest().spec['serving'] as object;
  const { pod, held } = servePod({ serving: { ...sample, priorityScheduling: true } });
  let reported: RuntimeIdentity | undefined;

  it("reports the arguments the operator's identity check reads, and passes it", async () => {
    expect(pod.argv).toEqual(
      expect.arrayContaining(['--enable-priority-scheduling', '--disable-priority-preemption']),
    );
    const at = pod.argv.indexOf('--default-priority-value');
    expect(pod.argv.slice(at, at + 2)).toEqual(['--default-priority-value', '0']);
    const url = held.server?.url ?? '';
    const info = ServerInfo.parse(await (await fetch(`${url}/server_info`)).json());
    expect(info).toMatchObject({
      enable_priority_scheduling: true,
      disable_priority_preemption: true,
      schedule_low_priority_values_first: false,
      // An unstamped request (the kubelet's /health, a warm-up, a Task) ranks as a default tenant's long prompt.
      default_priority_value: 0,
    });
    reported = computeRuntimeIdentity(info, ModelInfo.parse(await (await fetch(`${url}/model_info`)).json()));
    expect(reported.priorityScheduling).toBe(true);
    expect(compareIdentity(pod.declared, reported)).toEqual([]);
  });

  it('labels its queue gauges by priority, the total under priority="" (what the gateway\'s scrape reads)', async () => {
    const text = await (await fetch(`${held.server?.url ?? ''}/metrics`)).text();
    expect(text).toMatch(/^sglang:num_queue_reqs\{[^}]*priority=""[^}]*\} 0\.0$/m);
    expect(parseRuntimeMetrics(text)).toMatchObject({ queued: 0 });
  });

  it.each([
    ['/generate', { text: 'Hello', sampling_params: { max_new_tokens: 2 } }],
    ['/v1/completions', { model: 'llama-8b', prompt: 'Hello', max_tokens: 2 }],
    [
      '/v1/chat/completions',
      { model: 'llama-8b', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 2 },
    ],
  ])('serves %s with the priority the gateway stamps', async (path, body) => {
    // The endpoint as the gateway's table has it once status publishes what the runtime reported.
    const endpoint = buildTestEndpoint('pod', held.server?.url ?? '', {
      priorityScheduling: reported?.priorityScheduling === true,
    });
    const stamped = stampRuntimePriority(body, {
      endpoints: [endpoint],
      tenantPriority: 3,
      uncachedTokens: 5,
    });
    expect(stamped['priority']).toBe(7);
    const res = await fetch(`${held.server?.url ?? ''}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(stamped),
    });
    expect(res.status).toBe(200);
  });

  it('gives a request sent without a priority --default-priority-value 0 (its tokenizer series say so)', async () => {
    const url = held.server?.url ?? '';
    const res = await fetch(`${url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'Unstamped', sampling_params: { max_new_tokens: 2 } }),
    });
    expect(res.status).toBe(200);
    // tokenizer_manager._set_default_priority wrote 0 on the request; without the flag the label stays "".
    const text = await (await fetch(`${url}/metrics`)).text();
    expect(text).toMatch(/^sglang:prompt_tokens_total\{[^}]*priority="0"[^}]*\} [1-9]/m);
  });
});

describe('kit serve refuses what a CPU cannot run, before loading anything', () => {
  it.each([
    [['--enable-hisparse'], /HiSparse needs a sparse-attention model/],
    // Prefill/decode runs (Mooncake over TCP, test/e2e/real-sglang-pd.test.ts); NIXL is not installed.
    [
      ['--disaggregation-mode', 'prefill', '--disaggregation-transfer-backend', 'nixl'],
      /NIXL is not installed here/,
    ],
  ])('%j', async (extra, message) => {
    await expect(runKit(['serve', '--model-path', '/nonexistent/model', ...extra])).rejects.toThrow(message);
  });
});
