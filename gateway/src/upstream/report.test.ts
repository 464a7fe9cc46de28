import { describe, expect, it } from 'vitest';
import { SseReportSniffer } from './report.ts';

const event = (index: number, completionTokens: number): Buffer =>
  Buffer.from(
    `data: ${JSON.stringify({
      text: 'x',
      meta_info: { prompt_tokens: 2, completion_tokens: completionTokens, cached_tokens: 0 },
      index,
    })}\n\n`,
  );

describe('SseReportSniffer over a streamed /generate batch', () => {
  it("sums each item's latest completion_tokens; an index past what was asked for counts nothing", () => {
    const sniffer = new SseReportSniffer(2);
    for (const e of [event(0, 1), event(1, 1), event(0, 4), event(1, 3), event(7, 1_000_000)])
      sniffer.push(e);
    sniffer.push(Buffer.from('data: [DONE]\n\n'));
    expect(sniffer.usage().completionTokens).toBe(7);
  });

  it('a single sequence: the last event counts', () => {
    const sniffer = new SseReportSniffer();
    for (const e of [event(0, 1), event(0, 5)]) sniffer.push(e);
    expect(sniffer.usage().completionTokens).toBe(5);
  });
});
