import { describe, expect, it } from 'vitest';
import { matchesSelector, parseLabelSelector } from './label-selector.ts';

const labels = { 'cacheroute.dev/deployment': 'chat', 'cacheroute.dev/part': 'prefill' };
const matches = (text: string): boolean => {
  const s = parseLabelSelector(text);
  if (!s.ok) throw new Error(s.error);
  return matchesSelector(s.value, labels);
};

describe('label selectors', () => {
  it.each([
    ['', true],
    ['cacheroute.dev/deployment=chat', true],
    ['cacheroute.dev/deployment==chat,cacheroute.dev/part=prefill', true],
    ['cacheroute.dev/deployment=chat,cacheroute.dev/part=decode', false],
    ['cacheroute.dev/part!=decode', true],
    ['cacheroute.dev/part in (prefill, decode)', true],
    ['cacheroute.dev/part notin (prefill)', false],
    ['cacheroute.dev/part', true],
    ['!cacheroute.dev/part', false],
    ['team', false],
    ['team!=a', true],
  ])('%j matches: %s', (text, want) => {
    expect(matches(text)).toBe(want);
  });

  it('says how to write what it cannot read', () => {
    expect(parseLabelSelector('a=b,c>3')).toEqual({
      ok: false,
      error: expect.stringContaining('cannot read "c>3" (use key=value') as unknown,
    });
  });
});
