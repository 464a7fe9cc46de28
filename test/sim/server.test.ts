// Conformance of the simulator's endpoints with the shapes in
// ../shared/reference/sglang.md §2 (SGLang's http_server.py, io_struct.py, OpenAI layer).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode, encode } from './tokenizer.ts';
import { postJson, postSse, startSim, type RunningSim } from '../support/sim/testing.ts';

type Json = Record<string, unknown>;
const MODEL = 'acme/llama-8b-sim';

let sim: RunningSim;
beforeAll(async () => {
  sim = await startSim([
    '--model-path',
    MODEL,
    '--served-model-name',
    'served',
    '--enable-metrics',
    '--enable-cache-report',
  ]);
});
afterAll(() => sim.close());

describe('/generate', () => {
  it('answers {text, output_ids, meta_info} with the meta_info fields of SGLang 0.5.23', async () => {
    const r = await postJson(`${sim.url}/generate`, {
      text: 'Hello world',
      sampling_params: { max_new_tokens: 6 },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-sim-worker')).toBe(sim.server.workerId);
    const b = r.json as { text: string; output_ids: number[]; meta_info: Json };
    expect(b.output_ids).toHaveLength(6);
    expect(decode(b.output_ids)).toBe(b.text);
    expect(b.meta_info).toMatchObject({
      prompt_tokens: encode('Hello world').length,
      completion_tokens: 6,
      cached_tokens: 0,
      // null when nothing was cached (output_streamer.get_cached_tokens_details), no DP ranks: null.
      cached_tokens_details: null,
      dp_rank: null,
      finish_reason: { type: 'length', length: 6 },
      weight_versions: [{ version: 'default', start: 0, end: 6 }],
    });
    // The request id is SGLang's: uuid4 hex.
    expect(b.meta_info['id']).toMatch(/^[0-9a-f]{32}$/);
    expect(typeof b.meta_info['e2e_latency']).toBe('number');
    // --enable-metrics adds the scheduler's and tokenizer's timings.
    for (const k of ['queue_time', 'forward_entry_time', 'request_received_ts', 'decode_throughput'])
      expect(typeof b.meta_info[k]).toBe('number');
    // max_new_tokens 6: one prefill step + 5 decode steps of 6 + 0.35 ms.
    expect(b.meta_info['e2e_latency']).toBeCloseTo(11 / 8000 + 5 * 0.00635, 6);
    const again = (
      await postJson(`${sim.url}/generate`, { text: 'Hello world', sampling_params: { max_new_tokens: 6 } })
    ).json as { meta_info: Json };
    expect(again.meta_info['cached_tokens_details']).toEqual({
      device: encode('Hello world').length - 1,
      host: 0,
    });
  });

  it('is deterministic for (prompt, seed, max_new_tokens) and agrees with /tokenize', async () => {
    const body = { text: 'deterministic?', sampling_params: { max_new_tokens: 8, sampling_seed: 3 } };
    const a = (await postJson(`${sim.url}/generate`, body)).json as Json;
    const b = (await postJson(`${sim.url}/generate`, body)).json as Json;
    expect(a['text']).toBe(b['text']);
    const c = (
      await postJson(`${sim.url}/generate`, {
        ...body,
        sampling_params: { max_new_tokens: 8, sampling_seed: 4 },
      })
    ).json as Json;
    expect(c['text']).not.toBe(a['text']);
    const tok = (await postJson(`${sim.url}/tokenize`, { prompt: 'deterministic?' })).json as Json;
    expect(tok).toEqual({
      tokens: encode('deterministic?'),
      count: encode('deterministic?').length,
      max_model_len: 131072,
    });
    const detok = (await postJson(`${sim.url}/detokenize`, { tokens: a['output_ids'] })).json as Json;
    expect(detok['text']).toBe(a['text']);
  });

  it('streams SSE with cumulative text, finish_reason on the last chunk, then [DONE]', async () => {
    const r = await postSse(`${sim.url}/generate`, {
      input_ids: [5, 6, 7],
      sampling_params: { max_new_tokens: 4 },
      stream: true,
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    expect(r.events.at(-1)).toBe('[DONE]');
    const chunks = r.events.slice(0, -1).map((e) => JSON.parse(e) as { text: string; meta_info: Json });
    expect(chunks).toHaveLength(4);
    for (let i = 1; i < chunks.length; i++)
      expect(chunks[i]!.text.startsWith(chunks[i - 1]!.text)).toBe(true);
    expect(chunks.slice(0, -1).every((c) => c.meta_info['finish_reason'] === null)).toBe(true);
    expect(chunks.at(-1)!.meta_info['finish_reason']).toEqual({ type: 'length', length: 4 });
  });

  it('reports cached tokens on every streamed chunk once the prompt is warm', async () => {
    const body = { input_ids: [9, 8, 7, 6, 5, 4], sampling_params: { max_new_tokens: 3 }, stream: true };
    await postSse(`${sim.url}/generate`, body);
    const r = await postSse(`${sim.url}/generate`, body);
    const metas = r.events.slice(0, -1).map((e) => (JSON.parse(e) as { meta_info: Json }).meta_info);
    expect(metas.map((m) => m['cached_tokens'])).toEqual([5, 5, 5]);
  });

  it('serves batches as a list', async () => {
    const r = await postJson(`${sim.url}/generate`, {
      text: ['a', 'b'],
      sampling_params: { max_new_tokens: 2 },
    });
    expect(Array.isArray(r.json)).toBe(true);
    expect((r.json as Json[]).map((x) => (x['meta_info'] as Json)['completion_tokens'])).toEqual([2, 2]);
  });

  it('stops on a stop string and reports it as matched', async () => {
    const first = (
      await postJson(`${sim.url}/generate`, { text: 'stop test', sampling_params: { max_new_tokens: 8 } })
    ).json as Json;
    const words = (first['text'] as string).split(' ');
    const stop = words[3]!;
    const r = (
      await postJson(`${sim.url}/generate`, {
        text: 'stop test',
        sampling_params: { max_new_tokens: 8, stop },
      })
    ).json as Json;
    expect((r['meta_info'] as Json)['finish_reason']).toEqual({ type: 'stop', matched: stop });
    expect(r['text']).toBe(words.slice(0, 3).join(' ') + ' ');
  });

  it.each([
    [{}, 'Either text, input_ids or input_embeds should be provided.'],
    [
      { text: 'a', sampling_params: { temperature: -1 } },
      'temperature must be a non-negative finite number, got -1.',
    ],
    [{ text: 'a', sampling_params: { max_new_tokens: -1 } }, 'max_new_tokens must be at least 0, got -1.'],
  ])('refuses %j as the tokenizer manager does: 400 {"error": {"message"}}', async (body, message) => {
    const r = await postJson(`${sim.url}/generate`, body);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: { message } });
  });

  it.each([
    [
      { text: 'a', sampling_params: { seed: 3 } },
      /^unknown field `seed`, expected one of `max_new_tokens`, .*`sampling_seed`/,
    ],
    [
      { text: 'a', sampling_params: { max_new_tokens: 'many' } },
      /^invalid type: string "many", expected i64$/,
    ],
  ])('refuses %j at the proto contract gate: 400 {"error": "<serde text>"}', async (body, message) => {
    const r = await postJson(`${sim.url}/generate`, body);
    expect(r.status).toBe(400);
    expect(Object.keys(r.json as Json)).toEqual(['error']);
    expect((r.json as Json)['error']).toMatch(message);
  });

  it.each([[{ input_ids: [-1] }], [{ text: 3 }], ['{not json']])(
    'refuses %j as FastAPI validation: 400 ErrorResponse of type "Bad Request"',
    async (body) => {
      const r = await postJson(`${sim.url}/generate`, body);
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ object: 'error', type: 'Bad Request', param: null, code: 400 });
    },
  );
});

describe('OpenAI endpoints', () => {
  const messages = [{ role: 'user', content: ' ba be bi bo bu ca ce ci co cu' }];

  it('answers chat completions with usage; with --enable-cache-report the cached count is there, 0 included', async () => {
    const r = await postJson(`${sim.url}/v1/chat/completions`, {
      model: 'served',
      messages,
      max_tokens: 5,
      cache_salt: 'chat-1',
    });
    expect(r.status).toBe(200);
    const b = r.json as Json;
    expect(b).toMatchObject({ object: 'chat.completion', model: 'served' });
    // The id is the bare rid (no chatcmpl- prefix), as SGLang's.
    expect(b['id']).toMatch(/^[0-9a-f]{32}$/);
    const choice = (b['choices'] as Json[])[0]!;
    expect(choice).toMatchObject({ index: 0, finish_reason: 'length', message: { role: 'assistant' } });
    // ChatMessage drops tool_calls when None.
    expect(Object.keys(choice['message'] as Json).sort()).toEqual(['content', 'reasoning_content', 'role']);
    expect(b['usage']).toEqual({
      prompt_tokens: 12,
      total_tokens: 17,
      completion_tokens: 5,
      prompt_tokens_details: { cached_tokens: 0 },
      reasoning_tokens: 0,
      completion_tokens_details: null,
    });
    const again = (
      await postJson(`${sim.url}/v1/chat/completions`, {
        model: 'served',
        messages,
        max_tokens: 5,
        cache_salt: 'chat-1',
      })
    ).json as Json;
    expect(again['usage']).toMatchObject({ prompt_tokens_details: { cached_tokens: 11 } });
  });

  it('/tokenize renders messages as the chat path does, exactly one of prompt or messages', async () => {
    const tok = (await postJson(`${sim.url}/tokenize`, { messages })).json as Json;
    const chat = (
      await postJson(`${sim.url}/v1/chat/completions`, { messages, max_tokens: 1, cache_salt: 'tok-1' })
    ).json as { usage: Json };
    expect(tok['count']).toBe(chat.usage['prompt_tokens']);
    // Replaying the rendered ids through /generate hits the whole prefix the chat request cached.
    const gen = (
      await postJson(`${sim.url}/generate`, {
        input_ids: tok['tokens'],
        sampling_params: { max_new_tokens: 1 },
        cache_salt: 'tok-1',
      })
    ).json as { meta_info: Json };
    expect(gen.meta_info['cached_tokens']).toBe((tok['count'] as number) - 1);
    const both = await postJson(`${sim.url}/tokenize`, { prompt: 'x', messages });
    expect(both.status).toBe(400);
    expect(JSON.stringify(both.json)).toContain("Exactly one of 'prompt' or 'messages' must be provided.");
  });

  // What CachePolicy warm-up relies on: a document as the system message of a one-token
  // chat request leaves a prefix that a later chat request starting with it reuses.
  it('a system-message warm-up is a cached prefix of a later chat that starts with it', async () => {
    const system = { role: 'system', content: ' da de di do du fa fe fi fo fu ga ge gi go gu' };
    const warm = (
      await postJson(`${sim.url}/v1/chat/completions`, {
        messages: [system],
        max_completion_tokens: 1,
        temperature: 0,
        cache_salt: 'warm-1',
      })
    ).json as { usage: Json };
    const user = (
      await postJson(`${sim.url}/v1/chat/completions`, {
        messages: [system, { role: 'user', content: ' ha he' }],
        max_tokens: 1,
        cache_salt: 'warm-1',
      })
    ).json as { usage: Json };
    // The system message's role token and content; not the warm-up's trailing assistant token.
    expect(user.usage['prompt_tokens_details']).toEqual({
      cached_tokens: (warm.usage['prompt_tokens'] as number) - 1,
    });
  });

  it('echoes the request\'s model name, "default" when it names none', async () => {
    const named = await postJson(`${sim.url}/v1/chat/completions`, {
      model: 'whatever',
      messages,
      max_tokens: 1,
    });
    expect((named.json as Json)['model']).toBe('whatever');
    const unnamed = await postJson(`${sim.url}/v1/chat/completions`, { messages, max_tokens: 1 });
    expect((unnamed.json as Json)['model']).toBe('default');
  });

  it('streams a role-only first chat chunk, content chunks, an empty finish chunk, a usage chunk, [DONE]', async () => {
    const r = await postSse(`${sim.url}/v1/chat/completions`, {
      messages,
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = r.events.slice(0, -1).map((e) => JSON.parse(e) as Json);
    const deltas = chunks.map((c) => ((c['choices'] as Json[])[0]?.['delta'] ?? null) as Json | null);
    expect(deltas[0]).toEqual({ reasoning_content: null, role: 'assistant', content: '' });
    expect(deltas.at(-2)).toEqual({ reasoning_content: null });
    // Chat chunks carry no usage key; only the last one (no choices) has usage.
    expect(chunks.slice(0, -1).every((c) => !('usage' in c))).toBe(true);
    expect(chunks.at(-1)!['choices']).toEqual([]);
  });

  it('streams chat chunks and a usage chunk, then [DONE]', async () => {
    const r = await postSse(`${sim.url}/v1/chat/completions`, {
      messages,
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(r.events.at(-1)).toBe('[DONE]');
    const chunks = r.events.slice(0, -1).map((e) => JSON.parse(e) as Json);
    expect(chunks.every((c) => c['object'] === 'chat.completion.chunk')).toBe(true);
    const deltas = chunks.flatMap((c) => (c['choices'] as Json[]).map((x) => x['delta'] as Json));
    expect(deltas[0]).toMatchObject({ role: 'assistant' });
    expect((chunks.at(-2)!['choices'] as Json[])[0]!['finish_reason']).toBe('length');
    expect(chunks.at(-1)!['usage']).toMatchObject({ completion_tokens: 3 });
  });

  it('answers completions', async () => {
    const r = await postJson(`${sim.url}/v1/completions`, {
      model: 'served',
      prompt: 'once upon',
      max_tokens: 4,
    });
    expect(r.json).toMatchObject({
      object: 'text_completion',
      choices: [{ index: 0, finish_reason: 'length' }],
      usage: { completion_tokens: 4 },
    });
  });

  it('refuses malformed bodies as FastAPI validation, bad values as the OpenAI layer does', async () => {
    const r = await postJson(`${sim.url}/v1/chat/completions`, { messages: [] });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ object: 'error', type: 'Bad Request', code: 400 });
    const t = await postJson(`${sim.url}/v1/chat/completions`, { messages, temperature: -1 });
    expect(t.json).toMatchObject({ object: 'error', type: 'BadRequestError', code: 400 });
    expect((t.json as Json)['message']).toBe('temperature must be a non-negative finite number, got -1.0.');
  });

  it('lists the served model name', async () => {
    const r = await fetch(`${sim.url}/v1/models`);
    expect(await r.json()).toMatchObject({
      object: 'list',
      data: [{ id: 'served', object: 'model', root: 'served', parent: null, max_model_len: 131072 }],
    });
  });
});

describe('info, health, cache and load endpoints', () => {
  it.each(['/server_info', '/get_server_info'])(
    '%s reports the launch arguments, version and capacity',
    async (path) => {
      const b = (await (await fetch(`${sim.url}${path}`)).json()) as Json;
      expect(b).toMatchObject({
        model_path: MODEL,
        served_model_name: 'served',
        tokenizer_path: MODEL,
        enable_metrics: true,
        page_size: 1,
        status: 'ready',
        max_total_num_tokens: 413000,
        version: '0.5.23',
      });
      expect(typeof b['max_req_input_len']).toBe('number');
      expect(Array.isArray(b['internal_states'])).toBe(true);
    },
  );

  it.each(['/model_info', '/get_model_info'])('%s has the model fields', async (path) => {
    const b = (await (await fetch(`${sim.url}${path}`)).json()) as Json;
    expect(Object.keys(b).sort()).toEqual(
      [
        'architectures',
        'disaggregation_mode',
        'embedding',
        'has_audio_understanding',
        'has_image_understanding',
        'is_generation',
        'load_format',
        'model_path',
        'model_type',
        'preferred_sampling_params',
        'reasoning_parser',
        'served_model_name',
        'tokenizer_path',
        'tool_call_parser',
        'weight_version',
      ].sort(),
    );
    expect(b).toMatchObject({ model_path: MODEL, served_model_name: 'served', disaggregation_mode: 'null' });
  });

  it.each(['/health', '/health_generate'])('%s is 200 when the scheduler answers', async (path) => {
    const r = await fetch(`${sim.url}${path}`);
    expect(r.status).toBe(200);
    // Response(status_code=200): no body, no media type.
    expect(r.headers.get('content-type')).toBeNull();
    expect(await r.text()).toBe('');
  });

  it('flushes the cache when idle', async () => {
    const r = await fetch(`${sim.url}/flush_cache`, { method: 'POST' });
    expect(r.status).toBe(200);
    expect(await r.text()).toMatch(/^Cache flushed/);
    expect(sim.server.engine.tree.sizes().deviceSize).toBe(0);
  });

  it('/v1/loads reports one DP rank as LoadSnapshot.to_dict does, as JSON or Prometheus', async () => {
    const b = (await (await fetch(`${sim.url}/v1/loads?include=all`)).json()) as Json;
    expect(Object.keys(b).sort()).toEqual([
      'accelerator',
      'loads',
      'num_accelerators',
      'timestamp',
      'version',
    ]);
    expect(b['timestamp']).toMatch(/^\d{4}-\d\d-\d\dT.*\+00:00$/);
    const load = (b['loads'] as Json[])[0]!;
    for (const k of [
      'dp_rank',
      'num_running_reqs',
      'num_waiting_reqs',
      'token_usage',
      'memory',
      'disaggregation',
      'queues',
    ])
      expect(load).toHaveProperty(k);
    const core = (await (await fetch(`${sim.url}/v1/loads?include=core`)).json()) as Json;
    expect((core['loads'] as Json[])[0]).not.toHaveProperty('memory');
    const p = await (await fetch(`${sim.url}/v1/loads?format=prometheus`)).text();
    expect(p).toContain('sglang_num_running_reqs{dp_rank="0"} ');
    expect(p).toContain('sglang_disagg_prefill_bootstrap_queue_reqs{dp_rank="0"} ');
    // An unknown section raises in to_dict, outside the handler's try: a bare 500.
    const bogus = await fetch(`${sim.url}/v1/loads?include=bogus`);
    expect(bogus.status).toBe(500);
    expect(await bogus.text()).toBe('Internal Server Error');
  });

  it("/metrics exposes sglang: metrics with the label sets of SGLang's collectors", async () => {
    await postJson(`${sim.url}/generate`, { text: 'metrics', sampling_params: { max_new_tokens: 2 } });
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    const scheduler = '{model_name="served",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"}';
    for (const name of [
      'num_running_reqs',
      'num_used_tokens',
      'token_usage',
      'gen_throughput',
      'num_queue_reqs',
      'num_grammar_queue_reqs',
      'cache_hit_rate',
      'max_total_num_tokens',
      'utilization',
      'kv_used_tokens',
      'kv_available_tokens',
      'kv_evictable_tokens',
      'num_prefill_bootstrap_queue_reqs',
      'num_decode_prealloc_queue_reqs',
    ]) {
      expect(text).toContain(`sglang:${name}${scheduler} `);
    }
    // Idle with a warm cache: nothing used, the cache evictable, the pool = available + evictable (SGLang's _get_token_info).
    const gauge = (name: string): number =>
      Number(new RegExp(`^sglang:${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    expect(gauge('num_used_tokens')).toBe(0);
    expect(gauge('token_usage')).toBe(0);
    expect(gauge('kv_evictable_tokens')).toBeGreaterThan(0);
    expect(gauge('kv_available_tokens') + gauge('kv_evictable_tokens')).toBe(gauge('max_total_num_tokens'));
    const tokenizer = '{model_name="served",engine_type="unified"';
    for (const name of ['prompt_tokens_total', 'generation_tokens_total', 'num_requests_total'])
      expect(text).toContain(`sglang:${name}${tokenizer},is_streaming="false"} `);
    expect(text).toContain(`sglang:cached_tokens_total${tokenizer},cache_source="device"} `);
    // Multiprocess prometheus: no series before the first abort.
    expect(text).not.toContain('sglang:num_aborted_requests_total');
    // Regression: a made-up PD gauge; SGLang's prefill queue is the bootstrap queue.
    expect(text).not.toContain('num_prefill_prealloc_queue_reqs');
    for (const [h, labels] of [
      ['time_to_first_token_seconds', `${tokenizer},is_streaming="false"}`],
      ['e2e_request_latency_seconds', `${tokenizer},is_streaming="false"}`],
      ['inter_token_latency_seconds', `${tokenizer}}`],
      ['queue_time_seconds', scheduler],
    ] as const) {
      expect(text).toContain(`# TYPE sglang:${h} histogram`);
      expect(text).toContain(`sglang:${h}_count${labels} `);
    }
    // Bucket bounds as prometheus_client prints them.
    expect(text).toContain('le="1.0"');
  });

  it('answers 404 on /metrics without --enable-metrics and on legacy-only servers for new info paths', async () => {
    const old = await startSim(['--model-path', 'm', '--sim-legacy-info-only', '--sim-version', '0.5.0']);
    try {
      expect((await fetch(`${old.url}/metrics`)).status).toBe(404);
      expect((await fetch(`${old.url}/server_info`)).status).toBe(404);
      expect((await fetch(`${old.url}/model_info`)).status).toBe(404);
      expect(((await (await fetch(`${old.url}/get_server_info`)).json()) as Json)['version']).toBe('0.5.0');
    } finally {
      await old.close();
    }
  });
});

describe('/health under load (SGLang answers on any scheduler output, not on its own turn)', () => {
  let busy: RunningSim;
  beforeAll(async () => {
    busy = await startSim([
      '--model-path',
      MODEL,
      '--max-running-requests',
      '1',
      '--sim-decode-base-ms',
      '50',
    ]);
  });
  afterAll(() => busy.close());

  const untilRunning = async (): Promise<void> => {
    for (let i = 0; i < 100_000 && busy.server.engine.snapshot().numRunningReqs < 1; i++)
      await new Promise((r) => setImmediate(r));
  };

  it('is 200 at the first one-second poll while another request decodes and its own waits', async () => {
    const long = postJson(`${busy.url}/generate`, {
      text: 'x',
      sampling_params: { max_new_tokens: 2000, ignore_eos: true },
    }); // 100 s of decode, holding the only running slot
    await untilRunning();
    const start = busy.clock.now();
    expect((await fetch(`${busy.url}/health`)).status).toBe(200);
    // Answered at the first poll (1 s); before, it waited its turn behind the 100 s request.
    expect(busy.clock.now() - start).toBeLessThan(2000);
    expect((await long).status).toBe(200);
  });
});
