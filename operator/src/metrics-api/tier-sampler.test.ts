import { describe, expect, it } from 'vitest';
import { computeRejectionRates } from './tier-sampler.ts';

const reading = (at: number, instance: string, rejected: Record<string, number>) => ({
  at,
  instance,
  rejected: new Map(Object.entries(rejected)),
});

describe('computeRejectionRates', () => {
  it('takes each replica’s refusals over its readings of one start, and adds the replicas', () => {
    const rates = computeRejectionRates([
      [reading(0, 'a', { 'ns/chat': 10 }), reading(30_000, 'a', { 'ns/chat': 40 })],
      [reading(10_000, 'b', { 'ns/chat': 0 }), reading(30_000, 'b', { 'ns/chat': 20, 'ns/new': 5 })],
    ]);
    expect(Object.fromEntries(rates)).toEqual({ 'ns/chat': 1 + 1, 'ns/new': 0.25 });
  });

  it('starts again when a replica restarted, and needs two readings', () => {
    const rates = computeRejectionRates([
      [
        reading(0, 'a', { 'ns/chat': 500 }),
        reading(10_000, 'a2', { 'ns/chat': 3 }),
        reading(20_000, 'a2', { 'ns/chat': 13 }),
      ],
      [reading(20_000, 'b', { 'ns/chat': 7 })],
    ]);
    expect(Object.fromEntries(rates)).toEqual({ 'ns/chat': 1 });
  });
});
