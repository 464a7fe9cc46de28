// real-sglang: the operator and the gateway against the REAL SGLang 0.5.23, not
// the simulator. The sim-kubelet starts `python -m sglang.launch_server` (on CPU,
// with the kit's tiny Llama; what CPU forces is listed in
// hack/sglang/cacheroute_kit/serve.py) for the chosen Deployments' pods, from
// the pods' own rendered arguments, on the pods' IPs. Real control plane, KWOK
// GPU node, and at most two real servers at once (about 2.2 GB each).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeploymentStatus, Endpoint } from '#api';
import { MODEL_DIR } from '../../operator/src/controllers/deployment/model-cache/names.ts';
import { startOperator, type Operator } from '../../operator/src/operator.ts';
import { createLogger } from '#kube/logger.ts';
import { combineCacheSalt } from '#sglang/salt.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { startInProcessGateway, testKeysSecret, type InProcessGateway } from '../support/gateway.ts';
import { eventually, kubectlOk, listEvents } from '../support/kubectl.ts';
import { REPO_ROOT } from '../support/samples.ts';
import { removeKitModelLink } from '../support/real-sglang.ts';
import { drainReplay } from '../support/sglang-kit-events.ts';
import { runKit } from '../support/sglang-kit.ts';
import { loadTokenizer, type Tokenizer } from '../../gateway/src/tokenize/index.ts';
import { realRuntimeAuth, startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';

const NS = 'e2e-real-sglang';
const REAL: Readonly<Record<string, readonly string[]>> = {
  tiny: [],
  // Launched from its pod's arguments, but reporting another served model.
  impostor: ['--served-model-name', 'someone-else'],
  'tiny-hicache': [],
};
const SERVED = 'tiny-chat';
// The tiny model's tokenizer was trained on this sentence: about ten tokens a copy.
const SENTENCE = 'the quick brown fox jumps over the lazy dog ';

let cp: ControlPlane;
let kubelet: SimKubelet;
let operator: Operator;
let gateway: InProcessGateway;
let linkedModelDir = false;
let tokenizer: Tokenizer;

const k = (args: string[], input?: string) =>
  kubectlOk(['-n', NS, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });
const status = async (name: string): Promise<DeploymentStatus> =>
  (JSON.parse(await k(['get', 'sgd', name, '-o', 'json'])) as { status?: DeploymentStatus }).status ?? {};

/** A Deployment of the dense sample, served as `tiny-chat`, one replica on one GPU. */
function tinyDeployment(name: string, spec: Record<string, unknown> = {}) {
  const m = buildDeploymentManifest({ name, replicas: 1, gpus: 1, spec });
  const model = m.spec['model'] as Record<string, unknown>;
  model['servedName'] = name === 'tiny-hicache' ? 'tiny-hicache' : SERVED;
  m.spec['deploymentId'] = `${name}-r1`;
  return m;
}

async function waitVerified(name: string): Promise<Endpoint> {
  return eventually(
    async () => {
      const s = await status(name);
      // The endpoints' messages say why not (a runtime refusing connections, a mismatch).
      expect(s.verifiedReplicas, JSON.stringify(s.endpoints ?? [])).toBe(1);
      const e = s.endpoints?.[0];
      if (!e) throw new Error(`${name} has no endpoint`);
      return e;
    },
    { timeoutMs: 300_000, intervalMs: 1_000 },
  );
}

async function chat(model: string, content: string, cacheSalt?: string) {
  const r = await gateway.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    payload: {
      model,
      messages: [{ role: 'user', content }],
      max_tokens: 4,
      temperature: 0,
      ...(cacheSalt === undefined ? {} : { cache_salt: cacheSalt }),
    },
  });
  expect(r.statusCode, r.body).toBe(200);
  return r.json<{ usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } }>();
}

beforeAll(async () => {
  linkedModelDir = !existsSync(MODEL_DIR);
  cp = await startControlPlane({ full: true, gpuNodes: 1 });
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  kubelet = await startSimKubelet({
    kubeconfig: cp.kubeconfig,
    realSglang: (pod) => REAL[pod.metadata?.labels?.['cacheroute.dev/deployment'] ?? ''],
    // A real runtime that does not start says so here (its pod stays Ready, its port closed).
    log: (line) => console.info(`[sim-kubelet] ${line}`),
  });
  operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({ level: 'warn', fields: { component: 'operator' } }),
    leaderElection: false,
    http: false,
    gatewayKeysSecret: testKeysSecret(NS),
  });
  // The gateway holds the served model's own tokenizer (the tiny model's files), as --tokenizers gives it.
  const modelDir = (await runKit(['make-model'])).trim().split('\n').at(-1) ?? '';
  const loaded = await loadTokenizer(modelDir);
  if (!loaded.ok) throw new Error(loaded.error.message);
  tokenizer = loaded.value;
  gateway = await startInProcessGateway(cp.kubeconfig, [NS], { tokenizers: new Map([[SERVED, tokenizer]]) });
});

afterAll(async () => {
  await gateway?.stop();
  await operator?.stop();
  await kubelet?.stop();
  await cp?.stop();
  // `kit serve` links the declared model path to the tiny model when nothing is there.
  if (linkedModelDir) removeKitModelLink(MODEL_DIR);
});

describe('real-sglang', () => {
  it('the operator verifies a real SGLang runtime from what it reports about itself', async () => {
    await k(['apply', '-f', '-'], JSON.stringify(tinyDeployment('tiny', { events: { kvCache: true } })));
    // Result reuse off: every request here must reach the runtime and report its own cache.
    await k(
      ['apply', '-f', '-'],
      JSON.stringify(buildCachePolicyManifest('team-a', ['tiny'], { resultReuse: { enabled: false } })),
    );
    const e = await waitVerified('tiny');
    expect(e.reported).toMatchObject({
      modelPath: MODEL_DIR,
      servedModelName: SERVED,
      version: '0.5.23',
      radixCache: true,
      hicache: false,
      disaggregationMode: 'null',
    });
    // The kubelet records the server once it answers /health, which can be after the operator
    // verified it (SGLang serves /server_info during its warm-up): its start's own outcome.
    await kubelet.realReady(e.pod);
    expect(kubelet.reals.has(e.pod)).toBe(true);
  });

  it('an impostor real runtime (another served model) stays unverified, with a Warning event', async () => {
    await k(['apply', '-f', '-'], JSON.stringify(tinyDeployment('impostor')));
    const e = await eventually(
      async () => {
        const e = (await status('impostor')).endpoints?.[0];
        expect(e?.ready).toBe(true);
        expect(e?.reported?.servedModelName).toBe('someone-else');
        return e;
      },
      { timeoutMs: 300_000, intervalMs: 1_000 },
    );
    expect(e?.verified).toBe(false);
    expect(e?.reason).toBe('IdentityMismatch');
    await eventually(
      async () => {
        const warnings = (await listEvents(cp.kubeconfig, NS, 'impostor')).filter(
          (ev) => ev.type === 'Warning',
        );
        expect(warnings.map((ev) => ev.reason)).toContain('IdentityMismatch');
      },
      { timeoutMs: 30_000 },
    );
    // Its slot frees once its runtime has drained (preStop 10 s, then SIGTERM): the HiCache
    // Deployment below is created meanwhile, and its pod's server waits for the slot.
    await k(['delete', 'sgd', 'impostor', '--wait=false']);
  });

  it('the gateway routes a chat with the salt: a repeat reports real cached tokens, another salt none', async () => {
    const prompt = `A handbook chapter. ${SENTENCE.repeat(40)}`;
    const first = await eventually(() => chat(SERVED, prompt), { timeoutMs: 60_000, intervalMs: 1_000 });
    expect(first.usage.prompt_tokens).toBeGreaterThan(300);
    const again = await chat(SERVED, prompt);
    // Page size 16: the cached prefix is whole pages of the prompt.
    expect(again.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(
      first.usage.prompt_tokens - 16,
    );
    const otherSalt = await chat(SERVED, prompt, 'another-team');
    expect(otherSalt.usage.prompt_tokens_details.cached_tokens).toBe(0);
  });

  it('publishes real KV events that SGLang decodes, salted with the gateway salt', async () => {
    const s = await status('tiny');
    const ip = s.endpoints?.[0]?.ip ?? '';
    const policy = JSON.parse(await k(['get', 'cachepolicies.cacheroute.dev', 'team-a', '-o', 'json'])) as {
      status?: { targets?: { name: string; cacheSalt?: string }[] };
    };
    const salt = policy.status?.targets?.find((t) => t.name === 'tiny')?.cacheSalt ?? '';
    expect(salt).not.toBe('');
    const messages = await drainReplay({ endpoint: `tcp://${ip}:5557`, replay: `tcp://${ip}:5558` });
    expect(messages.every((m) => m.reencoded_equal)).toBe(true);
    const stored = messages.flatMap((m) => m.events ?? []).filter((ev) => ev.type === 'BlockStored');
    expect(stored.length).toBeGreaterThan(0);
    const salts = new Set(stored.map((ev) => ev.cache_salt));
    expect(salts).toContain(salt);
    expect(salts).toContain(combineCacheSalt(salt, 'another-team'));
    expect(stored.every((ev) => ev.block_size === 16)).toBe(true);
  });

  it("the gateway's KV index, fed by the real runtime's events, holds exactly the prefix the runtime reports cached", async () => {
    const s = await status('tiny');
    const e = s.endpoints?.[0];
    // The operator published the publishers /server_info advertised.
    expect(e?.events).toEqual({ port: 5557, ranks: 1, topic: 'kv', blockSize: 16, replayPort: 5558 });
    const id = `${NS}/${e?.pod ?? ''}`;
    const kv = gateway.app.gateway.kvIndex;
    await eventually(() => expect(kv.usability(id)).toEqual({ usable: true, partial: false }), {
      timeoutMs: 30_000,
    });
    const route = gateway.watcher.table.lookup(SERVED);
    if (!route) throw new Error('no route');
    const content = `An index chapter. ${SENTENCE.repeat(30)}`;
    const ids = await tokenizer.encodeChat([{ role: 'user', content }]);
    if (!ids.ok) throw new Error(ids.error.message);
    expect(kv.match(route.endpoints, ids.value, route.salt).get(id)?.deviceTokens).toBe(0);
    const first = await chat(SERVED, content);
    // The gateway's ids are the runtime's: same count.
    expect(first.usage.prompt_tokens).toBe(ids.value.length);
    const indexed = await eventually(
      () => {
        const m = kv.match(route.endpoints, ids.value, route.salt).get(id);
        expect(m?.deviceTokens).toBeGreaterThan(0);
        return m;
      },
      { timeoutMs: 10_000 },
    );
    const again = await chat(SERVED, content);
    expect(indexed?.deviceTokens).toBe(again.usage.prompt_tokens_details.cached_tokens);
  });

  it('a HiCache Deployment serves a prompt pushed out of the device pool from its host tier', async () => {
    await k(
      ['apply', '-f', '-'],
      JSON.stringify(
        tinyDeployment('tiny-hicache', {
          profile: 'hicache',
          hicache: { ratio: 4 },
          serving: { pageSize: 16, maxTotalTokens: 2048 },
        }),
      ),
    );
    const e = await waitVerified('tiny-hicache');
    expect(e.reported).toMatchObject({ hicache: true, radixCache: true });
    const base = `http://${e.ip}:${e.port}`;
    // The real server takes its own API key (--api-key from the pod's Secret), as from the gateway.
    const auth = await realRuntimeAuth(kubelet, e.pod);
    const generate = async (text: string) => {
      const r = await fetch(`${base}/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth },
        body: JSON.stringify({ text, sampling_params: { max_new_tokens: 1, temperature: 0 } }),
      });
      expect(r.status).toBe(200);
      return (
        (await r.json()) as { meta_info: { cached_tokens_details: { device: number; host: number } | null } }
      ).meta_info;
    };
    const target = `Chapter zero. ${SENTENCE.repeat(30)}`;
    await generate(target);
    // Six prompts of ~550 tokens overflow the 2,048-token device pool; the target's KV moves to host memory.
    for (let i = 1; i <= 6; i++) await generate(`Chapter ${i}. ${SENTENCE.repeat(60)}`);
    const back = await generate(target);
    expect(back.cached_tokens_details?.host ?? 0).toBeGreaterThan(0);
  });
});
