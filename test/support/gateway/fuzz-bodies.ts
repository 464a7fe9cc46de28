// Request bodies a careless, confused or hostile client might send, as
// fast-check arbitraries of small descriptions (what fast-check prints when a
// property fails); render() makes the bytes, so a 60 MiB body or a 10,000-deep
// array is one short line in a failure report.

import fc from 'fast-check';

export type RouteKind = 'chat' | 'completion' | 'generate';
export type ServedModel = 'm' | 'pd';
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A body, described; render() makes its bytes. */
export type BodySpec =
  | { readonly kind: 'none' }
  /** Any JSON value at all. */
  | { readonly kind: 'json'; readonly value: Json }
  /** A valid request, or one whose known field `path` is given a wrong value (or removed). */
  | {
      readonly kind: 'mutated';
      readonly route: RouteKind;
      /** `m` is served by standalone runtimes, `pd` by a prefill/decode pair. */
      readonly model: ServedModel;
      readonly stream: boolean;
      readonly path: readonly string[];
      readonly change: Change;
    }
  /** Text that is not quite JSON: truncated, NaN-like tokens, SSE, anything. */
  | { readonly kind: 'text'; readonly text: string }
  /** A valid request cut after `keep` of its characters. */
  | { readonly kind: 'truncated'; readonly route: RouteKind; readonly keep: number }
  /** Raw bytes (invalid UTF-8 among them) inside the prompt's JSON string. */
  | { readonly kind: 'bytes'; readonly route: RouteKind; readonly bytes: readonly number[] }
  /** `depth` nested arrays or objects at `where`. */
  | {
      readonly kind: 'deep';
      readonly route: RouteKind;
      readonly where: DeepWhere;
      readonly open: 'array' | 'object';
      readonly depth: number;
    }
  /** A string of `length` characters at `where`. */
  | {
      readonly kind: 'huge';
      readonly route: RouteKind;
      readonly where: HugeWhere;
      readonly char: string;
      readonly length: number;
    }
  /** `count` copies of a small JSON value in one array at `where`. */
  | {
      readonly kind: 'many';
      readonly route: RouteKind;
      readonly where: ManyWhere;
      readonly item: string;
      readonly count: number;
    };

export type DeepWhere = 'root' | 'unknown-field' | 'prompt-field' | 'metadata';
export type HugeWhere = 'prompt' | 'model' | 'cache_salt' | 'unknown-field' | 'role' | 'raw-invalid-utf8';
export type ManyWhere = 'unknown-field' | 'prompt-field';

// --- bodies ------------------------------------------------------------------

/** A valid small request of each kind (short outputs: the simulator generates every token). */
export function validBody(route: RouteKind, stream: boolean, model: ServedModel = 'm'): Record<string, Json> {
  const common = stream ? { stream: true } : {};
  switch (route) {
    case 'chat':
      return {
        model,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: [{ type: 'text', text: 'Say hello' }] },
        ],
        max_tokens: 3,
        ...common,
      };
    case 'completion':
      return { model, prompt: 'Once upon a time', max_tokens: 3, ...common };
    case 'generate':
      return {
        model,
        text: 'Once upon a time',
        sampling_params: { max_new_tokens: 3, temperature: 0 },
        ...common,
      };
  }
}

/** Each route's fields (the gateway's and the runtime's), as paths into validBody(). */
const COMMON_FIELDS = [
  ['model'],
  ['stream'],
  ['temperature'],
  ['seed'],
  ['cache_salt'],
  ['max_tokens'],
  ['n'],
  ['top_p'],
  ['stop'],
  ['stop_token_ids'],
  ['stream_options'],
  ['stream_options', 'include_usage'],
  ['rid'],
  ['bootstrap_host'],
  ['bootstrap_port'],
  ['bootstrap_room'],
  ['extra_key'],
  ['priority'],
  ['ignore_eos'],
  ['logprobs'],
  ['tools'],
  ['response_format'],
];
export const KNOWN_FIELDS: Readonly<Record<RouteKind, readonly (readonly string[])[]>> = {
  chat: [
    ...COMMON_FIELDS,
    ['messages'],
    ['messages', '0'],
    ['messages', '1'],
    ['messages', '1', 'role'],
    ['messages', '1', 'content'],
    ['messages', '1', 'content', '0'],
    ['messages', '1', 'content', '0', 'type'],
    ['messages', '1', 'content', '0', 'text'],
    ['max_completion_tokens'],
    ['chat_template_kwargs'],
    ['reasoning_effort'],
  ],
  completion: [...COMMON_FIELDS, ['prompt'], ['prompt', '0'], ['echo'], ['suffix']],
  generate: [
    ['model'],
    ['text'],
    ['input_ids'],
    ['input_ids', '0'],
    ['input_embeds'],
    ['sampling_params'],
    ['sampling_params', 'temperature'],
    ['sampling_params', 'max_new_tokens'],
    ['sampling_params', 'sampling_seed'],
    ['sampling_params', 'stop'],
    ['sampling_params', 'n'],
    ['sampling_params', 'top_k'],
    ['stream'],
    ['cache_salt'],
    ['rid'],
    ['return_logprob'],
    ['bootstrap_host'],
    ['bootstrap_room'],
    ['routed_dp_rank'],
    ['routing_key'],
    ['lora_path'],
    ['session_params'],
  ],
};

/** What is done to a valid request's field: nothing, take it out, or put a value there. */
export type Change = 'none' | 'remove' | { readonly set: Json };

/** A copy of `root` with `path` changed, creating containers on the way. */
export function setPath(root: Json, path: readonly string[], change: Exclude<Change, 'none'>): Json {
  const [head, ...rest] = path;
  if (head === undefined) return change === 'remove' ? null : change.set;
  const index = Number(head);
  if (Array.isArray(root) && Number.isInteger(index)) {
    const out = [...root];
    if (rest.length === 0 && change === 'remove') out.splice(index, 1);
    else out[index] = setPath(out[index] ?? {}, rest, change);
    return out.map((x) => x ?? null);
  }
  const obj: Record<string, Json> =
    root !== null && typeof root === 'object' && !Array.isArray(root) ? { ...root } : {};
  if (rest.length === 0 && change === 'remove') delete obj[head];
  else obj[head] = setPath(obj[head] ?? {}, rest, change);
  return obj;
}

function promptField(route: RouteKind): string {
  return route === 'chat' ? 'messages' : route === 'completion' ? 'prompt' : 'text';
}

/** validBody(route) as JSON text with `inner` (raw JSON text) at `where`. */
function spliceInto(route: RouteKind, where: DeepWhere | ManyWhere, inner: string): string {
  if (where === 'root') return inner;
  const body = validBody(route, false);
  const field = where === 'prompt-field' ? promptField(route) : where === 'metadata' ? 'metadata' : 'x_extra';
  const { [field]: _dropped, ...rest } = body;
  const head = JSON.stringify(rest).slice(0, -1);
  return `${head},${JSON.stringify(field)}:${inner}}`;
}

function hugeBody(spec: Extract<BodySpec, { kind: 'huge' }>): Buffer {
  if (spec.where === 'raw-invalid-utf8') {
    // Bytes that are not UTF-8 inside the prompt: each decodes to U+FFFD, three bytes when re-encoded.
    const head = Buffer.from(spliceInto(spec.route, 'prompt-field', '"').slice(0, -1));
    const tail = Buffer.from('"}');
    const raw = Buffer.alloc(spec.length, 0xff);
    return Buffer.concat([head, raw, tail]);
  }
  const big = spec.char.repeat(spec.length);
  const body: Record<string, Json> = validBody(spec.route, false);
  if (spec.where === 'prompt') {
    if (spec.route === 'chat') body['messages'] = [{ role: 'user', content: big }];
    else body[promptField(spec.route)] = big;
  } else if (spec.where === 'role') body['messages'] = [{ role: big, content: 'hi' }];
  else body[spec.where === 'unknown-field' ? 'x_extra' : spec.where] = big;
  return Buffer.from(JSON.stringify(body));
}

/** The bytes of a body. */
export function render(spec: BodySpec): Buffer | undefined {
  switch (spec.kind) {
    case 'none':
      return undefined;
    case 'json':
      return Buffer.from(JSON.stringify(spec.value));
    case 'mutated': {
      const base = validBody(spec.route, spec.stream, spec.model);
      const body = spec.change === 'none' ? base : setPath(base, spec.path, spec.change);
      return Buffer.from(JSON.stringify(body));
    }
    case 'text':
      return Buffer.from(spec.text);
    case 'truncated':
      return Buffer.from(JSON.stringify(validBody(spec.route, false)).slice(0, spec.keep));
    case 'bytes': {
      const text = Buffer.from(spliceInto(spec.route, 'prompt-field', '"').slice(0, -1));
      return Buffer.concat([text, Buffer.from(spec.bytes), Buffer.from('"}')]);
    }
    case 'deep': {
      const [open, close] = spec.open === 'array' ? ['[', ']'] : ['{"a":', '}'];
      const inner = `${open.repeat(spec.depth)}1${close.repeat(spec.depth)}`;
      return Buffer.from(spliceInto(spec.route, spec.where, inner));
    }
    case 'huge':
      return hugeBody(spec);
    case 'many': {
      const inner = `[${Array.from({ length: spec.count }, () => spec.item).join(',')}]`;
      return Buffer.from(spliceInto(spec.route, spec.where, inner));
    }
  }
}

// --- arbitraries -------------------------------------------------------------

const routeKind = fc.constantFrom<RouteKind>('chat', 'completion', 'generate');

/** JSON values of every type, small: what goes where a field's right type should be. */
export const wrongValue: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>(null, true, false, 0, -1, 1.5, 1e308, -1e308, '', 'x', [], {}, [[]], [{}], ['m']),
  fc.integer().map((n) => n as Json),
  fc.double().map((n) => n as Json), // NaN and ±Infinity serialise as null
  fc.string({ unit: 'grapheme', maxLength: 20 }).map((s) => s as Json),
  fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>,
);

const NAN_LIKE = ['NaN', '-NaN', 'Infinity', '-Infinity', '1e999', '-1e999', '-0', '0x10', '01', '1.', '.5'];

/** Text that looks like JSON or SSE and is not, or only nearly. */
const notQuiteJson: fc.Arbitrary<string> = fc.oneof(
  fc
    .constantFrom(...NAN_LIKE)
    .chain((tok) =>
      fc
        .constantFrom('temperature', 'seed', 'max_tokens', 'model', 'top_p')
        .map(
          (field) =>
            `{"model":"m","messages":[{"role":"user","content":"x"}],"prompt":"x","text":"x","${field}":${tok}}`,
        ),
    ),
  fc.constantFrom(
    '',
    ' ',
    'null',
    '[]',
    '{}',
    '"m"',
    '{"model":"m",}',
    "{'model':'m'}",
    '{"model":"m" /* c */}',
    '\uFEFF{"model":"m","prompt":"x"}',
    '{"__proto__":{"x":1},"model":"m","prompt":"x"}',
    '{"constructor":{"prototype":{"x":1}},"model":"m","prompt":"x"}',
    '{"model":"m","model":7,"prompt":"x"}',
    '{"model":"m","messages":[{"role":"user","content":"\\ud800"}]}',
    '{"model":"m","prompt":"\\u0000\\u001f"}',
    'data: {"model":"m","prompt":"x"}\n\n',
    'data: [DONE]\n\n',
    'event: error\ndata: {"error":{}}\n\n',
    ': keep-alive\n\n',
    '{"model":"m","messages":[{"role":"user","content":"data: [DONE]\\n\\n"}],"stream":true}',
  ),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.json({ maxDepth: 3 }).chain((j) => fc.nat(j.length).map((n) => j.slice(0, n))),
);

const mutated: fc.Arbitrary<BodySpec> = routeKind.chain((route) =>
  fc.record({
    kind: fc.constant('mutated' as const),
    route: fc.constant(route),
    model: fc.constantFrom<ServedModel>('m', 'm', 'm', 'pd'),
    stream: fc.boolean(),
    path: fc.constantFrom(...KNOWN_FIELDS[route]),
    change: fc.oneof(
      { weight: 1, arbitrary: fc.constant<Change>('none') },
      { weight: 1, arbitrary: fc.constant<Change>('remove') },
      { weight: 6, arbitrary: wrongValue.map((set): Change => ({ set })) },
    ),
  }),
);

/** Sizes mostly small, sometimes around and past the 64 MiB body limit. */
const hugeLength = fc.oneof(
  { weight: 20, arbitrary: fc.integer({ min: 1_000, max: 100_000 }) },
  { weight: 3, arbitrary: fc.integer({ min: 100_000, max: 4_000_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(23_000_000, 63_000_000, 70_000_000) },
);

export const bodySpec: fc.Arbitrary<BodySpec> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<BodySpec>({ kind: 'none' }) },
  {
    weight: 8,
    arbitrary: fc
      .jsonValue({ maxDepth: 4 })
      .map((value): BodySpec => ({ kind: 'json', value: value as Json })),
  },
  { weight: 30, arbitrary: mutated },
  { weight: 10, arbitrary: notQuiteJson.map((text): BodySpec => ({ kind: 'text', text })) },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('truncated' as const), route: routeKind, keep: fc.nat(200) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('bytes' as const),
      route: routeKind,
      bytes: fc.array(fc.integer({ min: 0x80, max: 0xff }), { minLength: 1, maxLength: 40 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('deep' as const),
      route: routeKind,
      where: fc.constantFrom<DeepWhere>('root', 'unknown-field', 'prompt-field', 'metadata'),
      open: fc.constantFrom<'array' | 'object'>('array', 'object'),
      depth: fc.oneof(fc.integer({ min: 2, max: 600 }), fc.constantFrom(1_000, 5_000, 10_000, 100_000)),
    }),
  },
  {
    weight: 3,
    arbitrary: hugeLength.chain((length) =>
      fc.record({
        kind: fc.constant('huge' as const),
        route: routeKind,
        where: fc.constantFrom<HugeWhere>(
          'prompt',
          'model',
          'cache_salt',
          'unknown-field',
          'role',
          'raw-invalid-utf8',
        ),
        // Past a few MB one byte a character, so the largest bodies stay near the body limit.
        char:
          length > 4_000_000
            ? fc.constant('a')
            : fc.constantFrom('a', ' ba', 'é', '\u{1F600}', '"', '\\', '\u0000'),
        length: fc.constant(length),
      }),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('many' as const),
      route: routeKind,
      where: fc.constantFrom<ManyWhere>('unknown-field', 'prompt-field'),
      item: fc.constantFrom('{}', '[]', '0', '"ab"', 'null', '{"role":"user","content":"x"}'),
      count: fc.oneof(fc.integer({ min: 1, max: 5_000 }), fc.constantFrom(100_000, 300_000)),
    }),
  },
);
