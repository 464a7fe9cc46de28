import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { AnswerProgress } from './answer-progress.ts';
import { DecodeEstimate } from './decode-estimate.ts';

describe('AnswerProgress', () => {
  it("hands out an estimated stream's timing at its end, for its measurement to bring back", () => {
    const clock = new ManualClock();
    const progress = new AnswerProgress(() => undefined);
    progress.estimate(new DecodeEstimate(clock), 'e', 100, { id: 'r' });
    clock.advance(700);
    expect(progress.end(true)).toEqual({ streamedMs: 700 });
  });

  it('hands out no timing once the body is counted, nor for an answer that did not run to its end', () => {
    const clock = new ManualClock();
    const estimate = new DecodeEstimate(clock);
    const counted = new AnswerProgress(() => undefined);
    counted.estimate(estimate, 'e', 100, { id: 'a' });
    counted.body(new TextEncoder().encode('data: {}\n\n'));
    clock.advance(700);
    expect(counted.end(true).streamedMs).toBeUndefined();
    const broken = new AnswerProgress(() => undefined);
    broken.estimate(estimate, 'e', 100, { id: 'b' });
    expect(broken.end(false)).toEqual({});
  });
});
