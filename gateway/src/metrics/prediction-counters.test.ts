import { describe, expect, it } from 'vitest';
import { PredictionCounters } from './prediction-counters.ts';

describe('PredictionCounters', () => {
  it('adds up per Deployment, forgets the ones no longer routed, and names its start', () => {
    const c = new PredictionCounters();
    c.record('ns/a', 100, 60);
    c.record('ns/a', 100, 0);
    c.record('ns/b', 50, 50);
    expect(c.totalsOf('ns/a')).toEqual({ decisions: 2, promptTokens: 200, predictedTokens: 60 });
    c.retain(new Set(['ns/a']));
    expect(c.totalsOf('ns/b')).toEqual({ decisions: 0, promptTokens: 0, predictedTokens: 0 });
    expect(c.instance).not.toBe(new PredictionCounters().instance);
  });
});
