// Every kind of answer the simulator sends, judged by SGLang 0.5.23's own
// request/response models (hack/sglang/cacheroute_kit/validate.py): the proto
// contract types of sglang/api/v1, the OpenAI pydantic models, and the shapes
// http_server builds inline. Responses are held strictly: a field the model
// does not declare is an error. The requests our own code sends SGLang go
// through the server's own pre-schedule checks.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateRequest } from '../../operator/src/sglang-client/generate.ts';
import { recordConformance } from '../support/conformance-report.ts';
import { validateBodies, type ValidateRequest } from '../support/sglang-kit.ts';
import { openKitSession, type KitSession } from '../support/sglang-kit-session.ts';
import { postJson, postSse, startSim, type RunningSim } from '../support/sim/testing.ts';

type Json = Record<string, unknown>;

let sim: RunningSim;
let hicache: RunningSim;
let prefill: RunningSim;
let decode: RunningSim;
// One kit process judges every batch below: SGLang's models imported once, not once a batch.
let kit: KitSession;
beforeAll(async () => {
  kit = openKitSession();
  const common = ['--served-model-name', 'tiny', '--enable-metrics', '--enable-cache-report'];
  sim = await startSim(['--model-path', '/models', ...common]);
  hicache = await startSim([
    '--model-path',
    '/models',
    ...common,
    '--enable-hierarchical-cache',
    '--hicache-ratio',
    '2',
    '--max-total-tokens',
    '4096',
  ]);
  prefill = await startSim([
    '--model-path',
    '/models',
    ...common,
    '--disaggregation-mode',
    'prefill',
    '--disaggregation-bootstrap-port',
    '0',
  ]);
  decode = await startSim([
    '--model-path',
    '/models',
    ...common,
    '--disaggregation-mode',
    'decode',
    '--sim-pd-timeout-ms',
    '50',
  ]);
});
afterAll(async () => {
  await Promise.all([sim, hicache, prefill, decode].map((s) => s.close()));
  await kit?.close();
});

const gen = { text: 'hello there', sampling_params: { max_new_tokens: 4 } };
const chat = { model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 };
const completion = { model: 'tiny', prompt: 'hello', max_tokens: 4 };

/** Parsed SSE events, [DONE] aside. */
async function events(url: string, body: unknown): Promise<unknown[]> {
  const r = await postSse(url, body);
  expect(r.status).toBe(200);
  expect(r.events.at(-1)).toBe('[DONE]');
  return r.events.slice(0, -1).map((e) => JSON.parse(e) as unknown);
}

async function getJson(url: string): Promise<unknown> {
  return (await fetch(url)).json();
}

async function answer(url: string, body: unknown, status: number): Promise<unknown> {
  const r = await postJson(url, body);
  expect(r.status, JSON.stringify(r.json)).toBe(status);
  return r.json;
}

/** Each answer the simulator gives, with the SGLang model that describes it. */
async function collectResponses(): Promise<ValidateRequest[]> {
  const out: ValidateRequest[] = [];
  const add = (id: string, model: string, body: unknown): void => void out.push({ id, model, body });
  const u = sim.url;
  add('generate', 'api.GenerateResponse', await answer(`${u}/generate`, gen, 200));
  add('generate cached', 'api.GenerateResponse', await answer(`${u}/generate`, gen, 200));
  const batch = (await answer(`${u}/generate`, { ...gen, text: ['a b', 'c d'] }, 200)) as unknown[];
  batch.forEach((b, i) => add(`generate batch[${i}]`, 'api.GenerateResponse', b));
  (await events(`${u}/generate`, { ...gen, stream: true })).forEach((e, i) =>
    add(`generate stream[${i}]`, 'api.GenerateResponse', e),
  );
  add('chat', 'openai.ChatCompletionResponse', await answer(`${u}/v1/chat/completions`, chat, 200));
  const chatStream = { ...chat, stream: true, stream_options: { include_usage: true } };
  (await events(`${u}/v1/chat/completions`, chatStream)).forEach((e, i) =>
    add(`chat stream[${i}]`, 'openai.ChatCompletionStreamResponse', e),
  );
  add('completion', 'openai.CompletionResponse', await answer(`${u}/v1/completions`, completion, 200));
  const completionStream = { ...completion, stream: true, stream_options: { include_usage: true } };
  (await events(`${u}/v1/completions`, completionStream)).forEach((e, i) =>
    add(`completion stream[${i}]`, 'openai.CompletionStreamResponse', e),
  );
  add('models', 'openai.ModelList', await getJson(`${u}/v1/models`));
  add('server_info', 'api.GetServerInfoResponse', await getJson(`${u}/server_info`));
  add('get_server_info', 'api.GetServerInfoResponse', await getJson(`${u}/get_server_info`));
  add('model_info', 'api.GetModelInfoResponse', await getJson(`${u}/model_info`));
  add('tokenize', 'openai.TokenizeResponse', await answer(`${u}/tokenize`, { prompt: 'hello' }, 200));
  add('tokenize list', 'openai.TokenizeResponse', await answer(`${u}/tokenize`, { prompt: ['a', 'b'] }, 200));
  add(
    'tokenize messages',
    'openai.TokenizeResponse',
    await answer(`${u}/tokenize`, { messages: [{ role: 'system', content: 'a' }] }, 200),
  );
  add(
    'detokenize',
    'openai.DetokenizeResponse',
    await answer(`${u}/detokenize`, { tokens: [300, 301] }, 200),
  );
  add('loads', 'kit.V1Loads', await getJson(`${u}/v1/loads`));
  add('loads core', 'kit.V1Loads', await getJson(`${u}/v1/loads?include=core`));
  // Errors, one of each kind.
  const seed = { text: 'a', sampling_params: { seed: 1 } };
  add('error contract', 'kit.GenerateContractError', await answer(`${u}/generate`, seed, 400));
  add('error handler', 'kit.GenerateError', await answer(`${u}/generate`, { sampling_params: {} }, 400));
  add('error validation', 'openai.ErrorResponse', await answer(`${u}/generate`, { text: 3 }, 400));
  add(
    'error openai',
    'openai.ErrorResponse',
    await answer(`${u}/v1/chat/completions`, { ...chat, temperature: -1 }, 400),
  );
  add(
    'error openai validation',
    'openai.ErrorResponse',
    await answer(`${u}/v1/chat/completions`, { model: 'x' }, 400),
  );
  add('error not found', 'kit.FastApiDetail', await getJson(`${u}/no_such_route`));
  // HiCache: a prompt back from the host tier reports {device, host}.
  add('hicache generate', 'api.GenerateResponse', await answer(`${hicache.url}/generate`, gen, 200));
  add('hicache server_info', 'api.GetServerInfoResponse', await getJson(`${hicache.url}/server_info`));
  // Prefill/decode: model info, and a decode whose prefill never comes (an HTTPException).
  add('pd model_info', 'api.GetModelInfoResponse', await getJson(`${decode.url}/model_info`));
  const room = { ...gen, bootstrap_host: '127.0.0.1', bootstrap_port: 9, bootstrap_room: 5 };
  add('error pd abort', 'openai.ErrorResponse', await answer(`${decode.url}/generate`, room, 500));
  add(
    'pd prefill',
    'api.GenerateResponse',
    await answer(`${prefill.url}/generate`, { ...room, bootstrap_port: 1 }, 200),
  );
  return out;
}

describe("the simulator's answers against SGLang's models", () => {
  it('validates every kind of response, strictly', async () => {
    const responses = await collectResponses();
    const results = await validateBodies(responses, kit.run);
    const failed = results.filter((r) => !r.ok).map((r) => `${r.id}: ${r.errors.join('; ')}`);
    recordConformance('sim-responses', { responses_validated: results.filter((r) => r.ok).length });
    expect(failed).toEqual([]);
    expect(results.length).toBeGreaterThanOrEqual(40);
  });

  it('refuses, as SGLang does, answers with a field its model does not declare or a wrong type', async () => {
    const good = (await answer(`${sim.url}/v1/chat/completions`, chat, 200)) as Json;
    const message = { role: 'assistant', content: 'x', reasoning_content: null };
    const results = await validateBodies(
      [
        { id: 'extra top-level', model: 'openai.ChatCompletionResponse', body: { ...good, extra: 1 } },
        {
          id: 'tool_calls null kept',
          model: 'openai.ChatCompletionResponse',
          body: {
            ...good,
            choices: [{ index: 0, message: { ...message, bogus: null }, finish_reason: 'stop' }],
          },
        },
        { id: 'usage null', model: 'openai.ChatCompletionResponse', body: { ...good, usage: null } },
        { id: 'wrong type', model: 'api.GenerateResponse', body: { text: 3 } },
        {
          id: 'loads extra',
          model: 'kit.V1Loads',
          body: {
            timestamp: 't',
            version: 'v',
            accelerator: null,
            num_accelerators: 1,
            loads: [{ bogus: 1 }],
          },
        },
      ],
      kit.run,
    );
    expect(results.map((r) => [r.id, r.ok])).toEqual(results.map((r) => [r.id, false]));
  });
});

describe('requests our code sends SGLang', () => {
  it("admits the operator's /generate body, refuses `seed` where SGLang wants `sampling_seed`", async () => {
    const ours: GenerateRequest = {
      input_ids: [1, 2, 3],
      sampling_params: { max_new_tokens: 8, temperature: 0, top_p: 0.9, stop: ['\n'], sampling_seed: 7 },
      cache_salt: 'salt',
      rid: 'r1',
      stream: false,
    };
    const [admitted, refused] = await validateBodies(
      [
        { id: 'operator', model: 'GenerateReqInput', body: ours },
        { id: 'seed', model: 'GenerateReqInput', body: { ...ours, sampling_params: { seed: 7 } } },
      ],
      kit.run,
    );
    expect(admitted).toMatchObject({ ok: true, errors: [] });
    expect(refused?.errors[0]).toMatch(/^400 unknown field `seed`/);
  });

  it('refuses what the simulator refuses at the contract gate, and admits what it admits', async () => {
    const bodies: [string, Json, boolean][] = [
      ['seed', { text: 'a', sampling_params: { seed: 1 } }, false],
      ['string max_new_tokens', { text: 'a', sampling_params: { max_new_tokens: 'x' } }, false],
      ['sampling_seed', { text: 'a', sampling_params: { max_new_tokens: 2, sampling_seed: 1 } }, true],
      ['negative temperature', { text: 'a', sampling_params: { temperature: -1 } }, false],
    ];
    const sglang = await validateBodies(
      bodies.map(([id, body]) => ({ id, model: 'GenerateReqInput', body })),
      kit.run,
    );
    const simulator = await Promise.all(bodies.map(([, body]) => postJson(`${sim.url}/generate`, body)));
    expect(sglang.map((r) => r.ok)).toEqual(bodies.map(([, , ok]) => ok));
    expect(simulator.map((r) => r.status === 200)).toEqual(bodies.map(([, , ok]) => ok));
  });
});
