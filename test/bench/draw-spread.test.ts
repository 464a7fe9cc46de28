import { describe, expect, it } from 'vitest';
import { renderDrawSummary, summarizeDraws } from './draw-spread.ts';

const ttft = (value: number) => ({ value, limit: 1.05, atLeast: false });
const hit = (value: number) => ({ value, limit: 0.97, atLeast: true });

describe('summarizeDraws', () => {
  it("gives each goal's mean, range and the draws that met it, a floor judged as a floor", () => {
    const summary = summarizeDraws([
      { 'R=8 ttft': ttft(1.0), 'R=8 hit': hit(0.99) },
      { 'R=8 ttft': ttft(1.1), 'R=8 hit': hit(0.96) },
      { 'R=8 ttft': ttft(1.03) },
    ]);
    expect(summary['R=8 ttft']).toEqual({ mean: 1.0433, min: 1, max: 1.1, met: 2, draws: 3 });
    expect(summary['R=8 hit']).toEqual({ mean: 0.975, min: 0.96, max: 0.99, met: 1, draws: 2 });
    expect(renderDrawSummary(['(none)', 'a', 'b'], summary)).toContain(
      'R=8 ttft: 1.043 [1.000, 1.100], met in 2 of 3',
    );
  });
});
