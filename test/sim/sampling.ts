// SGLang 0.5.23's two checks of sampling parameters, in the order /generate
// runs them. Pure.
//
// 1. The proto contract gate (sglang/api/v1/api_types.py SamplingParams,
//    "unknown keys rejected"): any other key is a 400 `{"error": "<serde
//    text>"}` before anything else looks at the request. The seed is
//    `sampling_seed`; `seed` is refused.
// 2. SamplingParams.verify (srt/sampling/sampling_params.py): value ranges, a
//    400 `{"error": {"message": ...}}` (OpenAI routes: an ErrorResponse).

/** The contract's fields, in its declaration order (which the refusal lists). */
export const SAMPLING_CONTRACT_KEYS = [
  'max_new_tokens',
  'stop',
  'stop_token_ids',
  'stop_regex',
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'frequency_penalty',
  'presence_penalty',
  'repetition_penalty',
  'min_new_tokens',
  'n',
  'json_schema',
  'regex',
  'ebnf',
  'structural_tag',
  'ignore_eos',
  'skip_special_tokens',
  'spaces_between_special_tokens',
  'no_stop_trim',
  'stream_interval',
  'logit_bias',
  'sampling_seed',
  'custom_params',
  'beam_width',
  'watermark',
  'choice',
] as const;

const KNOWN = new Set<string>(SAMPLING_CONTRACT_KEYS);

// The scalar types the contract decodes (decode_SamplingParams), by serde's name for them.
const INTS = [
  'max_new_tokens',
  'top_k',
  'min_new_tokens',
  'n',
  'stream_interval',
  'sampling_seed',
  'beam_width',
];
const FLOATS = [
  'temperature',
  'top_p',
  'min_p',
  'frequency_penalty',
  'presence_penalty',
  'repetition_penalty',
];
const STRINGS = ['json_schema', 'regex', 'ebnf', 'structural_tag'];
const BOOLS = ['ignore_eos', 'skip_special_tokens', 'spaces_between_special_tokens', 'no_stop_trim'];
type Rule = readonly [check: (v: unknown) => boolean, expected: string];
const rule = (check: (v: unknown) => boolean, expected: string): Rule => [check, expected];
const EXPECTED = new Map<string, Rule>([
  ...INTS.map((k): [string, Rule] => [k, rule((v) => Number.isInteger(v), 'i64')]),
  ...FLOATS.map((k): [string, Rule] => [k, rule((v) => typeof v === 'number', 'f64')]),
  ...STRINGS.map((k): [string, Rule] => [k, rule((v) => typeof v === 'string', 'a string')]),
  ...BOOLS.map((k): [string, Rule] => [k, rule((v) => typeof v === 'boolean', 'a boolean')]),
  ['stop', rule(isStringOrList, 'a string or a sequence of strings')],
  [
    'stop_token_ids',
    rule((v) => Array.isArray(v) && v.every((x) => Number.isInteger(x)), 'a sequence of i64'),
  ],
]);

function isStringOrList(v: unknown): boolean {
  return typeof v === 'string' || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
}

/** serde's `Unexpected` display (api_types._unexpected). */
function unexpected(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return `boolean \`${v}\``;
  if (typeof v === 'number') return Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``;
  if (typeof v === 'string') return `string ${JSON.stringify(v)}`;
  return Array.isArray(v) ? 'sequence' : 'map';
}

/** serde's `unknown_field` text, as the contract words it. */
export function unknownFieldMessage(key: string): string {
  return `unknown field \`${key}\`, expected one of ${SAMPLING_CONTRACT_KEYS.map((k) => `\`${k}\``).join(', ')}`;
}

/** The contract's refusal of one sampling_params value, or null. */
export function checkSamplingContract(sp: unknown): string | null {
  if (sp === null || sp === undefined) return null;
  if (typeof sp !== 'object' || Array.isArray(sp)) {
    return `invalid type: ${unexpected(sp)}, expected struct SamplingParams`;
  }
  for (const [key, v] of Object.entries(sp)) {
    if (!KNOWN.has(key)) return unknownFieldMessage(key);
    const r = EXPECTED.get(key);
    // null is each field's default.
    if (r && v !== null && !r[0](v)) return `invalid type: ${unexpected(v)}, expected ${r[1]}`;
  }
  return null;
}

export interface SamplingValues {
  readonly max_new_tokens?: number | null | undefined;
  readonly min_new_tokens?: number | null | undefined;
  readonly temperature?: number | null | undefined;
  readonly top_p?: number | null | undefined;
  readonly top_k?: number | null | undefined;
  readonly min_p?: number | null | undefined;
}

/** Python's str() of a float: SGLang's messages print floats as Python does. */
function pyNumber(v: number, isFloat: boolean): string {
  return isFloat && Number.isInteger(v) ? `${v}.0` : String(v);
}

/**
 * SamplingParams.verify's first refusal, or null. `floats`: the OpenAI layer
 * hands verify floats (pydantic), /generate the JSON's own numbers.
 */
export function verifySampling(sp: SamplingValues, floats = false): string | null {
  const temperature = sp.temperature ?? 1;
  if (!Number.isFinite(temperature) || temperature < 0)
    return `temperature must be a non-negative finite number, got ${pyNumber(temperature, floats)}.`;
  const topP = sp.top_p ?? 1;
  if (!(topP > 0 && topP <= 1)) return `top_p must be in (0, 1], got ${pyNumber(topP, floats)}.`;
  const minP = sp.min_p ?? 0;
  if (!(minP >= 0 && minP <= 1)) return `min_p must be in [0, 1], got ${pyNumber(minP, floats)}.`;
  const topK = sp.top_k ?? 1 << 30;
  if (topK < 1 && topK !== -1) return `top_k must be -1 (disable) or at least 1, got ${topK}.`;
  const minNew = sp.min_new_tokens ?? 0;
  if (minNew < 0) return `min_new_tokens must be in [0, max_new_tokens], got ${minNew}.`;
  const maxNew = sp.max_new_tokens;
  if (maxNew !== null && maxNew !== undefined) {
    if (maxNew < 0) return `max_new_tokens must be at least 0, got ${maxNew}.`;
    if (minNew > maxNew) return `min_new_tokens must be in [0, max_new_tokens(${maxNew})], got ${minNew}.`;
  }
  return null;
}
