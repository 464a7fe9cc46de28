// A small JSON Schema validator for output checks (no new dependency).
//
// Supported keywords: type (one or a list of: object, array, string, number,
// integer, boolean, null), required, properties, additionalProperties (boolean),
// enum, const, items (one schema), minItems, maxItems, minLength, maxLength
// (in code points), minimum, maximum. Annotations ($schema, $id, title,
// description, default, examples) are ignored. Any other keyword makes the
// schema unsupported: a check we cannot evaluate fails rather than passes.
import { canonicalJson } from './attempt/fingerprint.ts';
import { err, ok, type Result } from './attempt/types.ts';

const ANNOTATIONS = new Set(['$schema', '$id', 'title', 'description', 'default', 'examples', '$comment']);
const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);

export interface SchemaIssue {
  path: string;
  message: string;
}

type Schema = Record<string, unknown>;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A supported keyword's check of its own value, in the schema at `path`. */
type KeywordCheck = (v: unknown, k: string, path: string) => Result<void, SchemaIssue>;

/** A check of a keyword's value alone: `message(k)`, at `path/k`, unless `valid(v)`. */
function valueCheck(valid: (v: unknown) => boolean, message: (k: string) => string): KeywordCheck {
  return (v, k, path) => (valid(v) ? ok(undefined) : err({ path: `${path}/${k}`, message: message(k) }));
}

const isTypeList = (v: unknown): boolean =>
  (Array.isArray(v) ? v : [v]).every((t) => typeof t === 'string' && TYPES.has(t));
const isNameList = (v: unknown): boolean => Array.isArray(v) && v.every((x) => typeof x === 'string');
const isCount = (v: unknown): boolean => Number.isInteger(v) && (v as number) >= 0;
const countCheck = valueCheck(isCount, (k) => `${k} must be a non-negative integer`);
const boundCheck = valueCheck(
  (v) => typeof v === 'number',
  (k) => `${k} must be a number`,
);

const checkProperties: KeywordCheck = (v, k, path) => {
  if (!isObject(v)) return err({ path: `${path}/${k}`, message: 'properties must be an object' });
  for (const [name, sub] of Object.entries(v)) {
    const r = checkSchemaSupported(sub, `${path}/properties/${name}`);
    if (!r.ok) return r;
  }
  return ok(undefined);
};

/** The supported keywords: any other one makes the schema unsupported. */
const KEYWORD_CHECKS: ReadonlyMap<string, KeywordCheck> = new Map<string, KeywordCheck>([
  ['type', valueCheck(isTypeList, () => 'unknown type')],
  ['required', valueCheck(isNameList, () => 'required must be a list of names')],
  ['properties', checkProperties],
  [
    'additionalProperties',
    valueCheck(
      (v) => typeof v === 'boolean',
      () => 'only a boolean additionalProperties is supported',
    ),
  ],
  ['enum', valueCheck(Array.isArray, () => 'enum must be a list')],
  ['const', () => ok(undefined)],
  ['items', (v, _k, path) => checkSchemaSupported(v, `${path}/items`)],
  ['minItems', countCheck],
  ['maxItems', countCheck],
  ['minLength', countCheck],
  ['maxLength', countCheck],
  ['minimum', boundCheck],
  ['maximum', boundCheck],
]);

function checkKeyword(k: string, v: unknown, path: string): Result<void, SchemaIssue> {
  const check = KEYWORD_CHECKS.get(k);
  if (!check) return err({ path, message: `unsupported keyword ${k}` });
  return check(v, k, path);
}

/** Rejects a schema with keywords outside the subset, or malformed ones. */
export function checkSchemaSupported(schema: unknown, path = '#'): Result<void, SchemaIssue> {
  if (typeof schema === 'boolean') return ok(undefined);
  if (!isObject(schema)) return err({ path, message: 'a schema must be an object or a boolean' });
  for (const [k, v] of Object.entries(schema)) {
    if (ANNOTATIONS.has(k)) continue;
    const r = checkKeyword(k, v, path);
    if (!r.ok) return r;
  }
  return ok(undefined);
}

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function hasType(v: unknown, t: string): boolean {
  if (t === 'integer') return Number.isInteger(v);
  return typeOf(v) === t;
}

function equal(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

type Check = Result<void, SchemaIssue>;
const pass: Check = ok(undefined);

function validateScalar(value: unknown, s: Schema, path: string): Check {
  const fail = (message: string) => err({ path, message });
  if (s['type'] !== undefined) {
    const types = (Array.isArray(s['type']) ? s['type'] : [s['type']]) as string[];
    if (!types.some((t) => hasType(value, t)))
      return fail(`expected ${types.join(' or ')}, got ${typeOf(value)}`);
  }
  if (Array.isArray(s['enum']) && !s['enum'].some((e) => equal(e, value)))
    return fail(`not one of ${JSON.stringify(s['enum'])}`);
  if ('const' in s && !equal(s['const'], value)) return fail(`must equal ${JSON.stringify(s['const'])}`);
  if (typeof value === 'string') {
    const n = [...value].length;
    if (typeof s['minLength'] === 'number' && n < s['minLength'])
      return fail(`shorter than ${s['minLength']}`);
    if (typeof s['maxLength'] === 'number' && n > s['maxLength'])
      return fail(`longer than ${s['maxLength']}`);
  }
  if (typeof value === 'number') {
    if (typeof s['minimum'] === 'number' && value < s['minimum']) return fail(`below ${s['minimum']}`);
    if (typeof s['maximum'] === 'number' && value > s['maximum']) return fail(`above ${s['maximum']}`);
  }
  return pass;
}

function validateArray(value: unknown[], s: Schema, path: string): Check {
  if (typeof s['minItems'] === 'number' && value.length < s['minItems'])
    return err({ path, message: `fewer than ${s['minItems']} items` });
  if (typeof s['maxItems'] === 'number' && value.length > s['maxItems'])
    return err({ path, message: `more than ${s['maxItems']} items` });
  if (s['items'] === undefined) return pass;
  for (const [i, item] of value.entries()) {
    const r = validateJson(item, s['items'], `${path}[${i}]`);
    if (!r.ok) return r;
  }
  return pass;
}

function validateObject(value: Record<string, unknown>, s: Schema, path: string): Check {
  for (const name of (s['required'] as string[] | undefined) ?? []) {
    if (!Object.hasOwn(value, name)) return err({ path, message: `missing required property ${name}` });
  }
  const props = (s['properties'] as Record<string, unknown> | undefined) ?? {};
  for (const [name, sub] of Object.entries(props)) {
    if (!Object.hasOwn(value, name)) continue;
    const r = validateJson(value[name], sub, `${path}.${name}`);
    if (!r.ok) return r;
  }
  if (s['additionalProperties'] === false) {
    const extra = Object.keys(value).find((k) => !Object.hasOwn(props, k));
    if (extra !== undefined) return err({ path, message: `property ${extra} is not allowed` });
  }
  return pass;
}

/** The first place `value` breaks `schema` (already checked by checkSchemaSupported), or ok. */
export function validateJson(value: unknown, schema: unknown, path = '$'): Check {
  if (schema === true) return pass;
  if (schema === false) return err({ path, message: 'no value is allowed here' });
  const s = schema as Schema;
  const scalar = validateScalar(value, s, path);
  if (!scalar.ok) return scalar;
  if (Array.isArray(value)) return validateArray(value, s, path);
  if (isObject(value)) return validateObject(value, s, path);
  return pass;
}
