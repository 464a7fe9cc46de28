// The request script of the differential suite: the same requests, in the same
// order, to a real SGLang server and to the simulator launched with the same
// arguments. Each answer is kept whole (status, content type, body or SSE
// events); differential.test.ts compares them field by field.

export interface Observation {
  readonly name: string;
  readonly status: number;
  readonly contentType: string;
  /** Parsed JSON, or the text when the body is not JSON. */
  readonly body: unknown;
  /** SSE `data:` payloads (JSON parsed; "[DONE]" kept as text), for streamed answers. */
  readonly events?: readonly unknown[];
}

interface Step {
  readonly name: string;
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly body?: unknown;
  /** Sent as is (not JSON-encoded): a malformed body. */
  readonly raw?: string;
  readonly sse?: boolean;
}

/** A prompt long enough that its cached prefix is far above any page size (both tokenizers). */
export const LONG_PROMPT = Array.from(
  { length: 48 },
  (_, i) => `the quick brown fox number ${i} jumps over the lazy dog`,
).join(', ');

// Greedy and to the length asked: the tiny model's noise may emit its EOS, and the
// simulator never does; the finish kind must not depend on what the model says.
const gen = (extra: Record<string, unknown>): Record<string, unknown> => ({
  sampling_params: { max_new_tokens: 8, temperature: 0, ignore_eos: true },
  ...extra,
});

/** The steps, given the model name the OpenAI requests carry. */
export function buildSteps(model: string): Step[] {
  const sampling = { temperature: 0, ignore_eos: true };
  const chat = { model, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 8, ...sampling };
  const completion = { model, prompt: 'hello there', max_tokens: 8, ...sampling };
  return [
    { name: 'health', method: 'GET', path: '/health' },
    { name: 'health_generate', method: 'GET', path: '/health_generate' },
    { name: 'ready', method: 'GET', path: '/ready' },
    { name: 'model_info', method: 'GET', path: '/model_info' },
    { name: 'get_model_info', method: 'GET', path: '/get_model_info' },
    { name: 'server_info', method: 'GET', path: '/server_info' },
    { name: 'models', method: 'GET', path: '/v1/models' },
    { name: 'generate', method: 'POST', path: '/generate', body: gen({ text: 'hello there' }) },
    { name: 'generate_ids', method: 'POST', path: '/generate', body: gen({ input_ids: [5, 6, 7] }) },
    {
      name: 'generate_batch',
      method: 'POST',
      path: '/generate',
      body: gen({ text: ['hello there', 'general kenobi'] }),
    },
    {
      name: 'generate_stream',
      method: 'POST',
      path: '/generate',
      body: gen({ text: 'hello there', stream: true }),
      sse: true,
    },
    {
      name: 'generate_stop',
      method: 'POST',
      path: '/generate',
      body: {
        text: 'hello there',
        sampling_params: { max_new_tokens: 8, sampling_seed: 1, stop: [], ignore_eos: true },
      },
    },
    { name: 'chat', method: 'POST', path: '/v1/chat/completions', body: chat },
    {
      name: 'chat_other_model',
      method: 'POST',
      path: '/v1/chat/completions',
      body: { ...chat, model: 'other' },
    },
    {
      name: 'chat_stream',
      method: 'POST',
      path: '/v1/chat/completions',
      body: { ...chat, stream: true },
      sse: true,
    },
    {
      name: 'chat_stream_usage',
      method: 'POST',
      path: '/v1/chat/completions',
      body: { ...chat, stream: true, stream_options: { include_usage: true } },
      sse: true,
    },
    { name: 'completion', method: 'POST', path: '/v1/completions', body: completion },
    {
      name: 'completion_stream_usage',
      method: 'POST',
      path: '/v1/completions',
      body: { ...completion, stream: true, stream_options: { include_usage: true } },
      sse: true,
    },
    { name: 'tokenize', method: 'POST', path: '/tokenize', body: { prompt: 'hello there' } },
    { name: 'tokenize_list', method: 'POST', path: '/tokenize', body: { prompt: ['hello', 'there'] } },
    // Rendered by the chat template as for a chat completion (Task messages, warm-up).
    {
      name: 'tokenize_messages',
      method: 'POST',
      path: '/tokenize',
      body: { messages: [{ role: 'system', content: 'hello there' }] },
    },
    { name: 'detokenize', method: 'POST', path: '/detokenize', body: { tokens: [5, 6, 7] } },
    // Errors, one of each kind.
    {
      name: 'error_unknown_sampling_param',
      method: 'POST',
      path: '/generate',
      body: { text: 'hi', sampling_params: { max_new_tokens: 2, seed: 3 } },
    },
    {
      name: 'error_no_input',
      method: 'POST',
      path: '/generate',
      body: { sampling_params: { max_new_tokens: 2 } },
    },
    {
      name: 'error_negative_max_new_tokens',
      method: 'POST',
      path: '/generate',
      body: { text: 'hi', sampling_params: { max_new_tokens: -1 } },
    },
    { name: 'error_text_type', method: 'POST', path: '/generate', body: { text: 3 } },
    { name: 'error_bad_json', method: 'POST', path: '/generate', raw: '{"text": ' },
    {
      name: 'error_chat_no_messages',
      method: 'POST',
      path: '/v1/chat/completions',
      body: { model, max_tokens: 2 },
    },
    {
      name: 'error_chat_temperature',
      method: 'POST',
      path: '/v1/chat/completions',
      body: { ...chat, temperature: -1 },
    },
    {
      name: 'error_completion_too_long',
      method: 'POST',
      path: '/v1/completions',
      body: { ...completion, max_tokens: 1_000_000 },
    },
    { name: 'error_not_found', method: 'GET', path: '/no_such_route' },
    { name: 'error_loads_include', method: 'GET', path: '/v1/loads?include=bogus' },
    // The prefix cache: the same long prompt twice, then salts.
    { name: 'cache_first', method: 'POST', path: '/generate', body: gen({ text: LONG_PROMPT }) },
    { name: 'cache_repeat', method: 'POST', path: '/generate', body: gen({ text: LONG_PROMPT }) },
    {
      name: 'cache_salt_a',
      method: 'POST',
      path: '/generate',
      body: gen({ text: LONG_PROMPT, cache_salt: 'tenant-a' }),
    },
    {
      name: 'cache_salt_a_repeat',
      method: 'POST',
      path: '/generate',
      body: gen({ text: LONG_PROMPT, cache_salt: 'tenant-a' }),
    },
    {
      name: 'cache_salt_b',
      method: 'POST',
      path: '/generate',
      body: gen({ text: LONG_PROMPT, cache_salt: 'tenant-b' }),
    },
    {
      name: 'cache_chat_first',
      method: 'POST',
      path: '/v1/chat/completions',
      body: { ...chat, messages: [{ role: 'user', content: LONG_PROMPT }] },
    },
    {
      name: 'cache_chat_repeat',
      method: 'POST',
      path: '/v1/chat/completions',
      body: { ...chat, messages: [{ role: 'user', content: LONG_PROMPT }] },
    },
    { name: 'loads', method: 'GET', path: '/v1/loads' },
    { name: 'loads_core', method: 'GET', path: '/v1/loads?include=core' },
    { name: 'loads_prometheus', method: 'GET', path: '/v1/loads?format=prometheus' },
    { name: 'metrics', method: 'GET', path: '/metrics' },
    { name: 'flush_cache', method: 'POST', path: '/flush_cache' },
  ];
}

async function runStep(base: string, step: Step): Promise<Observation> {
  const init: RequestInit = { method: step.method };
  if (step.raw !== undefined || step.body !== undefined) {
    init.headers = { 'content-type': 'application/json' };
    init.body = step.raw ?? JSON.stringify(step.body);
  }
  const res = await fetch(`${base}${step.path}`, { ...init, signal: AbortSignal.timeout(60_000) });
  const text = await res.text();
  const contentType = (res.headers.get('content-type') ?? '').split(';')[0] ?? '';
  const obs = { name: step.name, status: res.status, contentType };
  if (step.sse && contentType === 'text/event-stream') {
    const events = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => parseJson(e.slice(6)));
    return { ...obs, body: null, events };
  }
  return { ...obs, body: parseJson(text) };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Runs every step in order (one at a time: cache answers depend on the order). */
export async function runScript(base: string, model: string): Promise<Map<string, Observation>> {
  const out = new Map<string, Observation>();
  for (const step of buildSteps(model)) out.set(step.name, await runStep(base, step));
  return out;
}
