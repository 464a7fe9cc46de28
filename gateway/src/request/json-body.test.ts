import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkJsonShape, DEFAULT_JSON_SHAPE_LIMITS } from './json-body.ts';

const small = { maxDepth: 3, maxContainers: 5, maxValues: 10 };

describe('checkJsonShape', () => {
  it('counts nesting, containers and values', () => {
    expect(checkJsonShape('[[[1]]]', small)).toBeUndefined();
    expect(checkJsonShape('[[[[1]]]]', small)).toBe('JSON nested deeper than 3 levels');
    expect(checkJsonShape('[[],[],[],[],[]]', small)).toBe('more than 5 JSON objects and arrays');
    expect(checkJsonShape('[1,2,3,4,5,6,7,8,9]', small)).toBeUndefined();
    expect(checkJsonShape('[1,2,3,4,5,6,7,8,9,10,11]', small)).toBe('more than 10 JSON values');
  });

  it('skips strings, escaped quotes and escaped backslashes included', () => {
    expect(checkJsonShape('{"a":"[[[[[[,,,,,,,,,,,,"}', small)).toBeUndefined();
    expect(checkJsonShape('{"a":"\\"[[[[[["}', small)).toBeUndefined();
    expect(checkJsonShape('{"a":"\\\\\\"[[[[["}', small)).toBeUndefined();
    // An escaped backslash ends right before the closing quote: the brackets after it count.
    expect(checkJsonShape('["\\\\",[[[1]]]]', small)).toBe('JSON nested deeper than 3 levels');
  });

  it('leaves malformed text to JSON.parse', () => {
    expect(checkJsonShape('"unterminated [[[[[[', small)).toBeUndefined();
    expect(checkJsonShape(']]]]{', small)).toBeUndefined();
  });

  it('agrees with JSON.parse on the depth of any JSON text', () => {
    const depthOf = (v: unknown): number =>
      v !== null && typeof v === 'object' ? 1 + Math.max(0, ...Object.values(v).map(depthOf)) : 0;
    fc.assert(
      fc.property(fc.json({ maxDepth: 8 }), (text) => {
        const within = checkJsonShape(text, { ...DEFAULT_JSON_SHAPE_LIMITS, maxDepth: 4 }) === undefined;
        expect(within).toBe(depthOf(JSON.parse(text)) <= 4);
      }),
      { seed: 20261201, numRuns: 500 },
    );
  });

  it('lets real requests through: a long chat, a prompt of token ids, a 60 MiB string', () => {
    const chat = JSON.stringify({
      model: 'm',
      messages: Array.from({ length: 10_000 }, (_, i) => ({
        role: i % 2 ? 'assistant' : 'user',
        content: [{ type: 'text', text: `turn ${i} [with {brackets}, "quotes" and \\ backslashes]` }],
      })),
    });
    expect(checkJsonShape(chat)).toBeUndefined();
    const ids = JSON.stringify({ input_ids: Array.from({ length: 1_000_000 }, (_, i) => i % 32_000) });
    expect(checkJsonShape(ids)).toBeUndefined();
    expect(checkJsonShape(JSON.stringify({ prompt: 'a'.repeat(60 * 1024 * 1024) }))).toBeUndefined();
  });
});
