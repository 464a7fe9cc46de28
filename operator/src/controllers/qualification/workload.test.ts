import { describe, expect, it } from 'vitest';
import { generateWorkload, paceOf, parseMooncakeTrace, poissonArrivals } from './workload.ts';

describe('generateWorkload', () => {
  const g = {
    seed: 3,
    sharedPrefix: { conversations: 2, turns: 3, systemPromptWords: 50, turnWords: 5 },
    documents: { documents: 2, documentWords: 40, questionsPerDocument: 2, questionWords: 4 },
  };

  it('is the same for the same seed and differs for another', () => {
    expect(generateWorkload(g)).toEqual(generateWorkload(g));
    expect(generateWorkload({ ...g, seed: 4 })[0]?.text).not.toBe(generateWorkload(g)[0]?.text);
  });

  it('shares the system prompt across conversations and grows each one turn by turn', () => {
    const r = generateWorkload(g);
    expect(r.map((x) => x.id).slice(0, 6)).toEqual([
      'conv-0-turn-0',
      'conv-1-turn-0',
      'conv-0-turn-1',
      'conv-1-turn-1',
      'conv-0-turn-2',
      'conv-1-turn-2',
    ]);
    const [c0t0, c1t0, c0t1] = r;
    const system = c0t0!.text.split('\n')[0]!;
    expect(system.split(' ').length).toBe(51); // "System:" + 50 words
    expect(c1t0!.text.startsWith(system)).toBe(true);
    expect(c0t1!.text.startsWith(c0t0!.text)).toBe(true);
    expect(c1t0!.text).not.toBe(c0t0!.text);
  });

  it('asks each document several questions behind the same document text', () => {
    const docs = generateWorkload(g).filter((x) => x.id.startsWith('doc-'));
    expect(docs).toHaveLength(4);
    const doc0 = docs[0]!.text.split('\n')[0]!;
    expect(docs[1]!.text.startsWith(doc0)).toBe(true);
    expect(docs[2]!.text.startsWith(doc0)).toBe(false);
  });
});

describe('parseMooncakeTrace', () => {
  const trace = [
    '{"timestamp": 0, "input_length": 20, "output_length": 5, "hash_ids": [1, 2]}',
    '{"timestamp": 10, "input_length": 15, "output_length": 5, "hash_ids": [1, 3]}',
    '',
  ].join('\n');

  it('turns equal hash ids into equal blocks, cutting the last to input_length', () => {
    const r = parseMooncakeTrace(trace, 10, 8);
    if (!r.ok) throw new Error(r.message);
    const [a, b] = r.requests.map((x) => x.text.split(' '));
    expect(a).toHaveLength(20);
    expect(b).toHaveLength(15);
    expect(a!.slice(0, 10)).toEqual(b!.slice(0, 10));
    expect(a!.slice(10, 15)).not.toEqual(b!.slice(10, 15));
  });

  it('takes at most maxRequests lines', () => {
    const r = parseMooncakeTrace(trace, 10, 1);
    expect(r.ok && r.requests.length).toBe(1);
  });

  it('names the line that is not a request', () => {
    expect(parseMooncakeTrace('{"hash_ids": [1]}\nnot json', 10, 8)).toEqual({
      ok: false,
      message: 'trace line 2 is not JSON',
    });
    expect(parseMooncakeTrace('{"hash_ids": []}', 10, 8)).toMatchObject({ ok: false });
  });
});

describe('poissonArrivals', () => {
  it('is the same for the same seed, starts at once and keeps the mean rate', () => {
    const rate = { requestsPerSecond: 10, seed: 5 };
    const a = poissonArrivals(2000, rate);
    expect(poissonArrivals(2000, rate)).toEqual(a);
    expect(poissonArrivals(2000, { ...rate, seed: 6 })).not.toEqual(a);
    expect(a[0]).toBe(0);
    for (let i = 1; i < a.length; i++) expect(a[i]).toBeGreaterThanOrEqual(a[i - 1] ?? 0);
    // 1999 gaps of mean 100 ms: the total within 10% of 199.9 s.
    expect((a.at(-1) ?? 0) / 199_900).toBeGreaterThan(0.9);
    expect((a.at(-1) ?? 0) / 199_900).toBeLessThan(1.1);
    // Exponential gaps: about e^-1 of them exceed the mean.
    const gaps = a.slice(1).map((x, i) => x - (a[i] ?? 0));
    expect(gaps.filter((g) => g > 100).length / gaps.length).toBeCloseTo(Math.exp(-1), 1);
  });

  it('paces a spec with a rate as an open loop and one without as a closed loop', () => {
    const workload = {
      generator: {
        seed: 1,
        documents: { documents: 1, documentWords: 5, questionsPerDocument: 3, questionWords: 2 },
      },
    };
    expect(paceOf({ concurrency: 4, workload }, 3)).toEqual({ kind: 'closed', concurrency: 4 });
    const open = paceOf({ workload: { ...workload, requestRate: { requestsPerSecond: 2, seed: 1 } } }, 3);
    expect(open.kind === 'open' && open.offsetsMs).toHaveLength(3);
  });
});
