import { describe, expect, it } from 'vitest';
import type { StreamedResponse } from './answer.ts';
import { pipeStream } from './relay.ts';
import type { ResponseSink } from './sink.ts';

/** An answer of these chunks, as undici hands them over. */
function answerOf(chunks: readonly string[]): StreamedResponse {
  const left = chunks.map((c) => Buffer.from(c));
  return {
    statusCode: 200,
    headers: { 'content-type': 'text/event-stream' },
    read: () => Promise.resolve(left.shift() ?? null),
    cancel: () => undefined,
    discard: () => Promise.resolve(),
  };
}

/** A client that takes everything. */
function collector(): ResponseSink & { readonly text: () => string } {
  const parts: string[] = [];
  return {
    open: () => undefined,
    write: (chunk) => {
      parts.push(Buffer.from(chunk).toString());
      return Promise.resolve();
    },
    end: (last) => {
      if (last !== undefined) parts.push(typeof last === 'string' ? last : Buffer.from(last).toString());
    },
    closed: false,
    destroy: () => undefined,
    text: () => parts.join(''),
  };
}

describe('pipeStream', () => {
  it("reports a stream's progress every 16 events, events split across chunks counted once", async () => {
    const events = Array.from(
      { length: 40 },
      (_x, i) => `data: {"choices":[{"delta":{"content":"t${i}"}}]}\n\n`,
    );
    // Chunks that cut events in the middle, then the end marker.
    const text = events.join('');
    const chunks = [text.slice(0, 100), text.slice(100, 1337), text.slice(1337), 'data: [DONE]\n\n'];
    const progress: number[] = [];
    const sink = collector();
    const result = await pipeStream(
      () => sink,
      answerOf(chunks),
      {},
      new AbortController().signal,
      undefined,
      undefined,
      1,
      (tokens) => progress.push(tokens),
    );
    expect(result.complete).toBe(true);
    expect(sink.text()).toBe(text + 'data: [DONE]\n\n');
    // At least 16 and 32 events by the reports; never more than were read.
    expect(progress.length).toBe(2);
    expect(progress[0]).toBeGreaterThanOrEqual(16);
    expect(progress[1]).toBeGreaterThanOrEqual(32);
    expect(progress[1]).toBeLessThanOrEqual(40);
  });
});
