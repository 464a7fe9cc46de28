import { describe, expect, it } from 'vitest';
import type { BlockStored } from '#sglang/kv-events.ts';
import { OutputAttribution, type ExpectedOutput } from './output-attribution.ts';

function stored(
  parent: bigint | null,
  hashes: bigint[],
  tokenIds: number[],
  extra: Partial<BlockStored> = {},
) {
  return {
    type: 'BlockStored',
    blockHashes: hashes,
    parentBlockHash: parent,
    tokenIds,
    blockSize: 4,
    loraId: null,
    medium: 'GPU',
    cacheSalt: null,
    ...extra,
  } as BlockStored;
}

function expected(
  id: string,
  lastPage: bigint | null,
  tail: number[] = [],
  extra: Partial<ExpectedOutput> = {},
) {
  return { id, lastPage, tail, blockSize: 4, cacheSalt: null, ...extra };
}

describe('OutputAttribution', () => {
  it("measures a routed request's output from the store that extends its prompt's last page", () => {
    const a = new OutputAttribution();
    // A 10-token prompt at page 4: 2 whole pages, tail [8, 9].
    a.expect('e', expected('r1', 2n, [8, 9]));
    // Prompt + output - 1 stored up to 16 tokens: 2 more pages past the prompt's 8.
    const m = a.stored('e', stored(2n, [3n, 4n], [8, 9, 50, 51, 52, 53, 54, 55]), 0);
    // 10 + output - 1 in [16, 20): output in [7, 10].
    expect(m).toEqual({ id: 'r1', min: 7, max: 10 });
    expect(a.sizeOf('e')).toBe(0);
  });

  it('is exact at page size 1', () => {
    const a = new OutputAttribution();
    a.expect('e', expected('r1', 7n, [], { blockSize: 1 }));
    const m = a.stored('e', stored(7n, [8n, 9n, 10n], [1, 2, 3], { blockSize: 1 }), 0);
    expect(m).toEqual({ id: 'r1', min: 4, max: 4 });
  });

  it('bounds the output by max_tokens', () => {
    const a = new OutputAttribution();
    a.expect('e', expected('r1', 2n, [8, 9], { maxTokens: 8 }));
    expect(a.stored('e', stored(2n, [3n, 4n], [8, 9, 1, 1, 1, 1, 1, 1]), 0)).toEqual({
      id: 'r1',
      min: 7,
      max: 8,
      cap: 8,
    });
  });

  it('leaves a store on another endpoint, salt, medium, page size or prompt tail alone', () => {
    const a = new OutputAttribution();
    a.expect('e', expected('r1', 2n, [8, 9]));
    const tokens = [8, 9, 1, 1];
    expect(a.stored('other', stored(2n, [3n], tokens), 0)).toBeUndefined();
    expect(a.stored('e', stored(2n, [3n], tokens, { cacheSalt: 't' }), 0)).toBeUndefined();
    expect(a.stored('e', stored(2n, [3n], tokens, { medium: 'CPU_PINNED' }), 0)).toBeUndefined();
    expect(a.stored('e', stored(2n, [3n], tokens, { blockSize: 8 }), 0)).toBeUndefined();
    expect(a.stored('e', stored(2n, [3n], [8, 7, 1, 1]), 0)).toBeUndefined();
    expect(a.stored('e', stored(9n, [3n], tokens), 0)).toBeUndefined();
    expect(a.stored('e', stored(2n, [3n], tokens), 0)?.id).toBe('r1');
  });

  it('tells two prompts apart by their tails, and attributes nothing when two wait on the same one', () => {
    const a = new OutputAttribution();
    a.expect('e', expected('r1', 2n, [8, 9]));
    a.expect('e', expected('r2', 2n, [8, 7]));
    expect(a.stored('e', stored(2n, [3n], [8, 7, 1, 1]), 0)?.id).toBe('r2');
    a.expect('e', expected('r3', 2n, [8, 9]));
    expect(a.stored('e', stored(2n, [5n], [8, 9, 1, 1]), 0)).toBeUndefined();
    expect(a.ambiguous).toBe(1);
    expect(a.sizeOf('e')).toBe(2);
  });

  it('keeps the requests waiting on one last page apart as they come and go', () => {
    const a = new OutputAttribution();
    for (const id of ['r1', 'r2', 'r3']) a.expect('e', expected(id, 2n, [8, 9]));
    a.drop('r1');
    expect(a.stored('e', stored(2n, [3n], [8, 9, 1, 1]), 0)).toBeUndefined();
    a.drop('r3');
    // r2 alone waits on the page now: the store is its.
    expect(a.stored('e', stored(2n, [4n], [8, 9, 1, 1]), 0)?.id).toBe('r2');
    // Nothing waits on it any more: a later request on it is the only one.
    expect(a.stored('e', stored(2n, [5n], [8, 9, 1, 1]), 0)).toBeUndefined();
    a.expect('e', expected('r4', 2n, [8, 9]));
    expect(a.stored('e', stored(2n, [6n], [8, 9, 1, 1]), 0)?.id).toBe('r4');
    expect(a.ambiguous).toBe(1);
    expect(a.sizeOf('e')).toBe(0);
  });

  it("takes a store running through another request's last prompt page for that one's prefill", () => {
    const a = new OutputAttribution();
    // r1's answer stored nothing (under a page); r2 is the next turn, its prompt r1's and more.
    a.expect('e', expected('r1', 2n, []));
    a.expect('e', expected('r2', 6n, [1]));
    expect(
      a.stored(
        'e',
        stored(
          2n,
          [3n, 4n, 5n, 6n],
          Array.from({ length: 16 }, () => 1),
        ),
        0,
      ),
    ).toBeUndefined();
    expect(a.ambiguous).toBe(1);
  });

  it('does not follow a prompt under a page (its store would link to the root)', () => {
    const a = new OutputAttribution();
    a.expect('e', expected('r1', null, [1, 2]));
    expect(a.sizeOf('e')).toBe(0);
  });

  it('takes the store until 5 s after the answer ended, then forgets the request', () => {
    const a = new OutputAttribution();
    a.expect('e', expected('r1', 2n));
    a.expect('e', expected('r2', 3n));
    a.ended('r1', 1000);
    a.ended('r2', 2000);
    expect(a.stored('e', stored(2n, [9n], [1, 1, 1, 1]), 6000)?.id).toBe('r1');
    expect(a.stored('e', stored(3n, [10n], [1, 1, 1, 1]), 7001)).toBeUndefined();
    expect(a.sizeOf('e')).toBe(0);
  });

  it('moves a request that is routed again, and forgets an endpoint', () => {
    const a = new OutputAttribution();
    a.expect('e', expected('r1', 2n));
    a.expect('f', expected('r1', 2n));
    expect(a.sizeOf('e')).toBe(0);
    expect(a.stored('f', stored(2n, [9n], [1, 1, 1, 1]), 0)?.id).toBe('r1');
    a.expect('f', expected('r2', 2n));
    a.forget('f');
    expect(a.sizeOf('f')).toBe(0);
  });
});
