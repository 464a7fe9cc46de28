// What one request may ask of the runtime (the CachePolicy's spec.requests),
// through the app: fields that are the operator's and media by reference are
// refused with a 400 that names them unless the policy opts in; batches and
// `n` are capped, and a tenant's limits count what the runtime serves.
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { digestApiKey } from '#api/gateway-keys.ts';
import { Admission, PRIVILEGED_REQUEST_FIELDS, RequestRules, type PrivilegedRequestField } from '#api';
import { startSim, type RunningSim } from '../../test/support/sim/testing.ts';
import { Gate, startFakeUpstream, type FakeUpstream } from '../../test/support/gateway/fake-upstream.ts';
import { buildTestEndpoint, buildTestRoute } from '../../test/support/gateway/routes.ts';
import { build } from './app.ts';
import { ManualClock } from '../../test/support/manual-clock.ts';
import { StaticRoutingTable, type ModelRoute } from './routing/table.ts';
import { buildTenantDirectory } from './tenancy/build-directory.ts';
import { KeyDirectory } from './tenancy/tenant.ts';

const KEY = 'k'.repeat(40);

let up: FakeUpstream;
let app: FastifyInstance | undefined;
let sim: RunningSim | undefined;

beforeEach(async () => {
  up = await startFakeUpstream();
});

afterEach(async () => {
  await app?.close();
  app = undefined;
  await sim?.close();
  sim = undefined;
  await up.close();
});

/** The gateway in front of `url`, model 'm' under a CachePolicy with these spec.requests. */
function serve(requests: object = {}, opts: { limits?: object; url?: string } = {}): FastifyInstance {
  const route: ModelRoute = buildTestRoute(
    [buildTestEndpoint('e', opts.url ?? up.url)],
    {},
    {
      requests: RequestRules.parse(requests),
    },
  );
  const table = new StaticRoutingTable([route]);
  if (!opts.limits) return (app = build({ table }));
  const tenants = new KeyDirectory();
  tenants.replace(
    buildTenantDirectory({
      tenants: [
        {
          apiVersion: 'cacheroute.dev/v1alpha1',
          kind: 'Tenant',
          metadata: { namespace: 'ns', name: 'a' },
          spec: { apiKeys: { secretRef: { name: 'a-keys' } }, models: ['m'], limits: opts.limits },
        },
      ],
      keyDigests: { 'ns/a-keys': { k: digestApiKey(KEY) } },
    }),
  );
  tenants.ready = true;
  return (app = build({ table, tenants, clock: new ManualClock() }));
}

const ROUTES = {
  chat: { url: '/v1/chat/completions', body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } },
  completion: { url: '/v1/completions', body: { model: 'm', prompt: 'hi' } },
  generate: { url: '/generate', body: { model: 'm', text: 'hi' } },
} as const;
type RouteName = keyof typeof ROUTES;

async function post(
  a: FastifyInstance,
  route: RouteName,
  extra: object,
  headers: Record<string, string> = {},
): Promise<{ status: number; code: unknown; message: string; headers: Record<string, unknown> }> {
  const { url, body } = ROUTES[route];
  const res = await a.inject({ method: 'POST', url, payload: { ...body, ...extra }, headers });
  const json = res.json<{ error?: { code?: unknown; message?: string } }>();
  return {
    status: res.statusCode,
    code: json.error?.code,
    message: json.error?.message ?? '',
    headers: res.headers,
  };
}

const PRIVILEGED_VALUES: Record<PrivilegedRequestField, unknown> = {
  custom_logit_processor: '{"callable": "gASV..."}',
  priority: 100,
  rid: 'someone-elses-request',
  routed_dp_rank: 0,
  data_parallel_rank: 0,
  disagg_prefill_dp_rank: 0,
  kv_hints: { version: 1, actions: [] },
  encoder_urls: ['http://10.0.0.9:8000'],
  return_hidden_states: true,
  return_routed_experts: true,
  return_indexer_topk: true,
  session_params: { id: 'another-tenants-session' },
  session_id: 'another-tenants-session',
  lora_id: 'adapter-uuid',
  custom_labels: { request: 'a-new-series-each-time' },
  log_metrics: false,
  no_logs: true,
};

const everyFieldOnEveryRoute = PRIVILEGED_REQUEST_FIELDS.flatMap((field) =>
  (Object.keys(ROUTES) as RouteName[]).map((route) => [field, route] as const),
);

describe('fields that are the operator’s', () => {
  it.each(everyFieldOnEveryRoute)(
    '%s on %s: 400 naming the field and the opt-in, and no runtime sees it',
    async (field, route) => {
      const res = await post(serve(), route, { [field]: PRIVILEGED_VALUES[field] });
      expect([res.status, res.code]).toEqual([400, 'GW_FIELD_NOT_ALLOWED']);
      expect(res.message).toContain(`'${field}'`);
      expect(res.message).toContain('spec.requests.allowPrivilegedFields');
      expect(up.received).toHaveLength(0);
    },
  );

  it.each(PRIVILEGED_REQUEST_FIELDS)(
    '%s reaches the runtime as sent where the policy allows it',
    async (field) => {
      const res = await post(serve({ allowPrivilegedFields: [field] }), 'completion', {
        [field]: PRIVILEGED_VALUES[field],
      });
      expect(res.status).toBe(200);
      expect(up.received[0]?.body[field]).toEqual(PRIVILEGED_VALUES[field]);
    },
  );

  it("SGLang's defaults ask for nothing and pass; lora_path names an adapter the operator loaded", async () => {
    const defaults = {
      return_hidden_states: false,
      return_routed_experts: false,
      log_metrics: true,
      no_logs: false,
    };
    const a = serve();
    for (const route of Object.keys(ROUTES) as RouteName[])
      expect((await post(a, route, { ...defaults, lora_path: 'sql-adapter' })).status).toBe(200);
    expect(up.received[0]?.body['lora_path']).toBe('sql-adapter');
  });

  it('allowing one field allows no other; null is the field left out', async () => {
    const a = serve({ allowPrivilegedFields: ['priority'] });
    expect((await post(a, 'chat', { priority: 5, rid: 'r' })).message).toContain("'rid'");
    expect((await post(a, 'chat', { rid: null, custom_logit_processor: null })).status).toBe(200);
  });
});

describe('media by reference', () => {
  const part = (type: string, url: string): object => ({ type, [type]: { url } });
  const chatWith = (...parts: object[]): object => ({
    messages: [{ role: 'user', content: [{ type: 'text', text: 'look' }, ...parts] }],
  });
  const PNG = 'data:image/png;base64,iVBORw0KGgo=';

  it.each([
    [
      'an https image URL',
      chatWith(part('image_url', 'https://internal.example/x.png')),
      'messages[0].content[1].image_url.url',
    ],
    [
      'a video URL',
      chatWith(part('video_url', 'http://10.0.0.1/v.mp4')),
      'messages[0].content[1].video_url.url',
    ],
    [
      'an audio URL',
      chatWith(part('audio_url', 'http://169.254.169.254/latest/meta-data')),
      'messages[0].content[1].audio_url.url',
    ],
    [
      'a file:// URL',
      chatWith(part('image_url', 'file:///etc/passwd')),
      'messages[0].content[1].image_url.url',
    ],
    [
      'a path on the pod',
      chatWith(part('image_url', '/models/secret.png')),
      'messages[0].content[1].image_url.url',
    ],
    [
      'a URL after an inline image',
      chatWith(part('image_url', PNG), part('image_url', 'https://x/y.png')),
      'messages[0].content[2].image_url.url',
    ],
    [
      'an image_url given as a bare string',
      chatWith({ type: 'image_url', image_url: 'https://x/y.png' }),
      'messages[0].content[1].image_url',
    ],
  ])('chat with %s: 400 naming where, and no runtime sees it', async (_name, extra, path) => {
    const res = await post(serve(), 'chat', extra);
    expect([res.status, res.code]).toEqual([400, 'GW_FIELD_NOT_ALLOWED']);
    expect(res.message).toContain(`'${path}'`);
    expect(res.message).toContain('data: URL');
    expect(res.message).toContain('spec.requests.allowMediaUrls');
    expect(up.received).toHaveLength(0);
  });

  it.each([
    ['an image URL', { image_data: 'https://x/y.png' }, 'image_data'],
    ['a video path', { video_data: '/etc/hostname' }, 'video_data'],
    ['an audio URL in a batch', { text: ['a', 'b'], audio_data: [PNG, 'http://x/a.wav'] }, 'audio_data[1]'],
    [
      'several images of a batch prompt',
      { text: ['a', 'b'], image_data: [[PNG], [PNG, 'file:///x.png']] },
      'image_data[1][1]',
    ],
    ['an ImageData object', { image_data: { url: 'https://x/y.png', detail: 'auto' } }, 'image_data.url'],
    ['bare base64 (a path can be spelt in its alphabet)', { image_data: 'proc/self//environ' }, 'image_data'],
  ])('/generate with %s: 400 naming where', async (_name, extra, path) => {
    const res = await post(serve(), 'generate', extra);
    expect([res.status, res.code]).toEqual([400, 'GW_FIELD_NOT_ALLOWED']);
    expect(res.message).toContain(`'${path}'`);
    expect(up.received).toHaveLength(0);
  });

  it('inline media is served: data: URLs, and OpenAI input_audio', async () => {
    const a = serve();
    const inline = chatWith(part('image_url', PNG), {
      type: 'input_audio',
      input_audio: { data: 'UklGRg==', format: 'wav' },
    });
    expect((await post(a, 'chat', inline)).status).toBe(200);
    expect((await post(a, 'generate', { image_data: [PNG, { url: PNG }] })).status).toBe(200);
    expect(up.received).toHaveLength(2);
  });

  it('references reach the runtime where the policy allows them', async () => {
    const a = serve({ allowMediaUrls: true });
    expect((await post(a, 'chat', chatWith(part('image_url', 'https://x/y.png')))).status).toBe(200);
    expect((await post(a, 'generate', { image_data: 'https://x/y.png' })).status).toBe(200);
  });
});

describe('batches and n', () => {
  it.each([
    ['/generate text', 'generate', { text: ['a', 'b', 'c', 'd', 'e'] }, "The batch in 'text' is 5 prompts"],
    [
      '/generate input_ids',
      'generate',
      { text: undefined, input_ids: [[1], [2], [3], [4], [5]] },
      "The batch in 'input_ids' is 5 prompts",
    ],
    [
      '/v1/completions prompt',
      'completion',
      { prompt: ['a', 'b', 'c', 'd', 'e'] },
      "The batch in 'prompt' is 5 prompts",
    ],
    ['chat n', 'chat', { n: 3 }, "'n' is 3"],
    ['completion n', 'completion', { n: 3 }, "'n' is 3"],
    ['/generate sampling_params.n', 'generate', { sampling_params: { n: 3 } }, "'sampling_params.n' is 3"],
  ] as const)(
    '%s over the policy cap: 400 naming the field and the cap',
    async (_name, route, extra, says) => {
      const res = await post(serve({ maxBatchSize: 4, maxN: 2 }), route, extra);
      expect([res.status, res.code]).toEqual([400, 'GW_REQUEST_TOO_LARGE']);
      expect(res.message).toContain(says);
      expect(res.message).toMatch(/spec\.requests\.max(BatchSize|N) for model 'm' \([24]\)/);
      expect(up.received).toHaveLength(0);
    },
  );

  it('at the caps is served; the defaults cap n at 16 and a batch at 256', async () => {
    const capped = serve({ maxBatchSize: 4, maxN: 2 });
    expect(
      (await post(capped, 'generate', { text: ['a', 'b', 'c', 'd'], sampling_params: { n: 2 } })).status,
    ).toBe(200);
    await capped.close();
    const defaults = serve();
    expect((await post(defaults, 'chat', { n: 16 })).status).toBe(200);
    expect((await post(defaults, 'chat', { n: 17 })).code).toBe('GW_REQUEST_TOO_LARGE');
    const batch = (k: number) => ({ prompt: Array.from({ length: k }, () => 'a') });
    expect((await post(defaults, 'completion', batch(256))).status).toBe(200);
    expect((await post(defaults, 'completion', batch(257))).code).toBe('GW_REQUEST_TOO_LARGE');
  });
});

describe("a tenant's limits count what the runtime serves", () => {
  const as = { authorization: `Bearer ${KEY}` };

  it('a batch is a request per prompt and per sample, and its prompt tokens are the sum', async () => {
    const a = serve({}, { limits: { requestsPerMinute: 10, tokensPerMinute: 100_000 } });
    // 4 prompts x n 2 = 8 requests; 4 prompts of 400 characters = 400 estimated tokens (4 a token).
    const text = Array.from({ length: 4 }, () => 'x'.repeat(400));
    const res = await post(a, 'generate', { text, sampling_params: { n: 2 } }, as);
    expect(res.status).toBe(200);
    expect(res.headers['x-ratelimit-remaining-requests']).toBe('2');
    expect(res.headers['x-ratelimit-remaining-tokens']).toBe(String(100_000 - 400));
    // 3 prompts do not fit the 2 left; one does.
    const over = await post(a, 'completion', { prompt: ['a', 'b', 'c'] }, as);
    expect([over.status, over.code, over.headers['x-ratelimit-limited']]).toEqual([
      429,
      'GW_RATE_LIMITED',
      'requests',
    ]);
    expect((await post(a, 'chat', { n: 2 }, as)).status).toBe(200);
  });

  it('a batch of token ids counts each prompt’s ids', async () => {
    const a = serve({}, { limits: { tokensPerMinute: 1000 } });
    const res = await post(a, 'generate', { text: undefined, input_ids: [[1, 2, 3], [4, 5], [6]] }, as);
    expect(res.headers['x-ratelimit-remaining-tokens']).toBe(String(1000 - 6));
  });

  it('a request of more requests than the tenant may send in a minute: 400, it could never fit', async () => {
    const a = serve({}, { limits: { requestsPerMinute: 10 } });
    const res = await post(a, 'completion', { prompt: Array.from({ length: 6 }, () => 'a'), n: 2 }, as);
    expect([res.status, res.code]).toEqual([400, 'GW_REQUEST_TOO_LARGE']);
    expect(res.message).toContain(
      "12 requests (prompts x n), above Tenant 'ns/a' limits.requestsPerMinute (10)",
    );
    expect(up.received).toHaveLength(0);
  });

  it('completion tokens of a /generate batch are charged for every prompt (the SGLang simulator)', async () => {
    sim = await startSim(['--model-path', 'm']);
    const a = serve({}, { limits: { tokensPerMinute: 100_000 }, url: sim.url });
    const sampling_params = { max_new_tokens: 5, ignore_eos: true };
    const batch = await post(
      a,
      'generate',
      {
        input_ids: [
          [1, 2],
          [3, 4],
          [5, 6],
        ],
        text: undefined,
        sampling_params,
      },
      as,
    );
    expect(batch.status).toBe(200);
    // The next answer's figures: 6 prompt tokens and 3 x 5 completion tokens so far, and its own 2.
    const next = await post(a, 'generate', { input_ids: [7, 8], text: undefined, sampling_params }, as);
    expect(next.headers['x-ratelimit-remaining-tokens']).toBe(String(100_000 - 6 - 15 - 2));
  });
});

describe('a streamed /generate batch is charged for every prompt (the SGLang simulator)', () => {
  it('its completion tokens are the sum over its items, not the last event', async () => {
    sim = await startSim(['--model-path', 'm']);
    const a = serve({}, { limits: { tokensPerMinute: 100_000 }, url: sim.url });
    const headers = { authorization: `Bearer ${KEY}` };
    const sampling_params = { max_new_tokens: 5, ignore_eos: true };
    const input_ids = [
      [1, 2],
      [3, 4],
      [5, 6],
    ];
    const streamed = await a.inject({
      method: 'POST',
      url: '/generate',
      headers,
      payload: { model: 'm', input_ids, sampling_params, stream: true },
    });
    expect(streamed.statusCode).toBe(200);
    const indexes = new Set([...streamed.body.matchAll(/"index":(\d+)/g)].map((m) => m[1]));
    expect(indexes).toEqual(new Set(['0', '1', '2']));
    // The next answer's figures: 6 prompt tokens and 3 x 5 completion tokens so far, and its own 2.
    const next = await post(a, 'generate', { input_ids: [7, 8], text: undefined, sampling_params }, headers);
    expect(next.headers['x-ratelimit-remaining-tokens']).toBe(String(100_000 - 6 - 15 - 2));
  });
});

describe('admission counts what the runtime serves', () => {
  it('a batch of 2 prompts x n 2 holds 4 of 4 places: a single request behind it is refused', async () => {
    const route = buildTestRoute(
      [buildTestEndpoint('e', up.url)],
      {},
      {
        admission: Admission.parse({ adaptive: false, maxConcurrency: 4, maxQueue: 0 }),
      },
    );
    app = build({ table: new StaticRoutingTable([route]) });
    up.headGate = new Gate();
    const batch = post(app, 'generate', { text: ['a', 'b'], sampling_params: { n: 2 } });
    await up.headGate.untilWaiting(1);
    const single = post(app, 'generate', {});
    // Without weights the single request is admitted and held beside the batch.
    await Promise.race([single, up.headGate.untilWaiting(2)]);
    up.headGate.open();
    expect([(await single).status, (await single).code]).toEqual([429, 'GW_OVERLOADED']);
    expect((await batch).status).toBe(200);
    expect(up.received).toHaveLength(1);
  });
});
