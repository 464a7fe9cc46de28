import { describe, expect, it } from 'vitest';
import { findInvalidCheck, runChecks, type OutputCheck } from './checks.ts';

const schema = JSON.stringify({
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  required: ['name', 'tags'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 2, maxLength: 5 },
    level: { enum: ['low', 'high'] },
    count: { type: 'integer', minimum: 0, maximum: 3 },
    tags: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 2 },
    kind: { const: 'x' },
    note: { type: ['string', 'null'] },
  },
});
const json: OutputCheck = { name: 'shape', type: 'JSONSchema', schema };

describe('runChecks', () => {
  it('passes with no checks', () => {
    expect(runChecks('anything', undefined)).toEqual({ ok: true, value: undefined });
  });

  it.each<[string, string, OutputCheck[]]>([
    ['regex', 'answer: 42', [{ name: 'r', type: 'Regex', pattern: '^answer: \\d+$' }]],
    ['length in code points', 'héllo😀', [{ name: 'l', type: 'Length', min: 6, max: 6 }]],
    ['json schema', '{"name":"ab","tags":["t"],"level":"low","count":3,"kind":"x","note":null}', [json]],
  ])('passes %s', (_n, output, checks) => {
    expect(runChecks(output, checks).ok).toBe(true);
  });

  it.each<[string, string, OutputCheck[], string, RegExp]>([
    [
      'regex mismatch',
      'answer: x',
      [{ name: 'r', type: 'Regex', pattern: '^answer: \\d+$' }],
      'r',
      /does not match/,
    ],
    ['invalid regex', 'x', [{ name: 'r', type: 'Regex', pattern: '(' }], 'r', /invalid pattern/],
    ['too short', 'ab', [{ name: 'l', type: 'Length', min: 3 }], 'l', /fewer than 3/],
    ['too long', 'abcd', [{ name: 'l', type: 'Length', max: 3 }], 'l', /more than 3/],
    ['not JSON', 'nope', [json], 'shape', /output is not JSON/],
    ['wrong type', '[]', [json], 'shape', /expected object, got array/],
    ['missing required', '{"name":"ab"}', [json], 'shape', /missing required property tags/],
    ['string too short', '{"name":"a","tags":["t"]}', [json], 'shape', /\$\.name: shorter than 2/],
    ['string too long', '{"name":"abcdef","tags":["t"]}', [json], 'shape', /\$\.name: longer than 5/],
    ['enum', '{"name":"ab","tags":["t"],"level":"mid"}', [json], 'shape', /\$\.level: not one of/],
    ['integer', '{"name":"ab","tags":["t"],"count":1.5}', [json], 'shape', /\$\.count: expected integer/],
    ['maximum', '{"name":"ab","tags":["t"],"count":4}', [json], 'shape', /\$\.count: above 3/],
    ['items', '{"name":"ab","tags":[1]}', [json], 'shape', /\$\.tags\[0\]: expected string/],
    ['maxItems', '{"name":"ab","tags":["a","b","c"]}', [json], 'shape', /more than 2 items/],
    ['const', '{"name":"ab","tags":["t"],"kind":"y"}', [json], 'shape', /\$\.kind: must equal/],
    [
      'additionalProperties',
      '{"name":"ab","tags":["t"],"extra":1}',
      [json],
      'shape',
      /property extra is not allowed/,
    ],
    [
      'unsupported keyword',
      '{}',
      [{ name: 's', type: 'JSONSchema', schema: '{"pattern":"x"}' }],
      's',
      /unsupported keyword pattern/,
    ],
    [
      'schema not JSON',
      '{}',
      [{ name: 's', type: 'JSONSchema', schema: '{' }],
      's',
      /schema is not valid JSON/,
    ],
  ])('fails %s with which check and why', (_n, output, checks, name, why) => {
    const r = runChecks(output, checks);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.name).toBe(name);
      expect(r.error.message).toMatch(why);
    }
  });

  it('matches under RE2: a catastrophic-backtracking pattern gives its verdict on a long output', () => {
    // JavaScript's RegExp takes seconds for (a+)+$ on 27 characters of this shape, and
    // doubles with each character more; RE2 is linear in the output.
    const output = `${'a'.repeat(100_000)}!`;
    const r = runChecks(output, [{ name: 'r', type: 'Regex', pattern: '(a+)+$' }]);
    expect(!r.ok && r.error.message).toBe('output does not match /(a+)+$/');
    expect(runChecks(`${'a'.repeat(100_000)}`, [{ name: 'r', type: 'Regex', pattern: '(a+)+$' }]).ok).toBe(
      true,
    );
  });

  it.each([
    ['a backreference', '(a)\\1'],
    ['a lookahead', 'a(?=b)'],
    ['a lookbehind', '(?<=a)b'],
  ])('fails a pattern with %s rather than backtrack, and names it before any output', (_n, pattern) => {
    const checks: OutputCheck[] = [
      { name: 'len', type: 'Length', min: 1 },
      { name: 'r', type: 'Regex', pattern },
    ];
    const r = runChecks('aab', checks);
    expect(!r.ok && r.error.message).toMatch(/^invalid pattern: RE2 cannot compile the pattern/);
    expect(findInvalidCheck(checks)).toMatchObject({
      name: 'r',
      type: 'Regex',
      message: expect.stringMatching(/^RE2 cannot compile .*backreferences or lookaround/),
    });
  });

  it('finds no invalid check among patterns RE2 compiles', () => {
    expect(findInvalidCheck([{ name: 'r', type: 'Regex', pattern: '^(?P<word>\\w+)\\s*\\p{L}*$' }])).toBe(
      undefined,
    );
    expect(findInvalidCheck(undefined)).toBe(undefined);
  });

  it('reports the first failing check in spec order', () => {
    const r = runChecks('x', [
      { name: 'ok', type: 'Length', max: 5 },
      { name: 'first', type: 'Length', min: 2 },
      { name: 'second', type: 'Regex', pattern: 'y' },
    ]);
    expect(!r.ok && r.error.name).toBe('first');
  });
});
