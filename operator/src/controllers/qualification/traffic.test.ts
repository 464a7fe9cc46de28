// A pass against a real simulator process (test/sim): what a runtime reports
// (cached tokens, the simulator header) is read from its answers.
import { setTimeout as sleepFor } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrapPortOf, startSim, type RunningSim } from '../../../../test/support/sim/testing.ts';
import { runPass, type PassOptions } from './traffic.ts';
import { generateWorkload, poissonArrivals } from './workload.ts';

let sim: RunningSim;
beforeAll(async () => {
  sim = await startSim(['--model-path', 'acme/qual-sim', '--enable-cache-report', '--sim-time-scale', '50']);
});
afterAll(() => sim.close());

const requests = generateWorkload({
  seed: 1,
  documents: { documents: 1, documentWords: 400, questionsPerDocument: 3, questionWords: 5 },
});

function options(salt: string, url = sim.url): PassOptions {
  return {
    url,
    salt,
    sampling: { temperature: 0 },
    maxNewTokens: 4,
    pace: { kind: 'closed', concurrency: 1 },
    timeoutMs: 30_000,
  };
}

describe('runPass', () => {
  it('sees nothing cached in a fresh salt, and the repeat served from the cache', async () => {
    const cold = await runPass(requests, options('fresh-1'));
    const warm = await runPass(requests, options('fresh-1'));
    expect(cold.requests.every((r) => r.ok && r.simulator === true)).toBe(true);
    expect(cold.requests[0]?.cachedTokens).toBe(0);
    // Later questions share the document with the first: cached inside the cold pass already.
    expect(cold.requests[1]?.cachedTokens).toBeGreaterThan(0);
    for (const r of warm.requests) {
      expect(r.completionTokens).toBe(4);
      expect(r.cachedTokens).toBeGreaterThan(0);
      expect(r.cachedTokens).toBe(r.cachedDevice! + r.cachedHost! + r.cachedStorage!);
      expect(r.ttftMs).toBeLessThanOrEqual(r.e2eMs!);
    }
    const other = await runPass(requests.slice(0, 1), options('fresh-2'));
    expect(other.requests[0]?.cachedTokens).toBe(0);
  });

  it('records a request that found no runtime as a failure, with its reason', async () => {
    const pass = await runPass(requests.slice(0, 2), {
      ...options('x', 'http://127.0.0.1:1'),
      pace: { kind: 'closed', concurrency: 2 },
    });
    expect(pass.requests).toHaveLength(2);
    expect(pass.requests.every((r) => !r.ok && r.error?.startsWith('POST /generate:'))).toBe(true);
  });

  it('an open loop sends each request at its arrival, not after the answers before it', async () => {
    const offsetsMs = poissonArrivals(requests.length, { requestsPerSecond: 20, seed: 3 });
    const waits: number[] = [];
    // Arrivals come at once here (the waits are recorded, not slept): every request is then
    // sent before any answer could arrive, as an open loop must; a closed loop of one would
    // send the second only after the first's answer.
    const open = await runPass(requests, {
      ...options('open-1'),
      pace: { kind: 'open', offsetsMs },
      sleep: (ms) => {
        waits.push(ms);
        return Promise.resolve();
      },
    });
    expect(open.requests.every((r) => r.ok)).toBe(true);
    expect(waits).toHaveLength(offsetsMs.filter((o) => o > 0).length);
    for (const [i, w] of waits.entries()) expect(w).toBeLessThanOrEqual(offsetsMs[i + 1] ?? 0);
    const lastSent = Math.max(...open.requests.map((r) => r.sentAtMs ?? Infinity));
    const firstAnswered = Math.min(...open.requests.map((r) => (r.sentAtMs ?? 0) + (r.e2eMs ?? 0)));
    expect(lastSent).toBeLessThan(firstAnswered);
    // A closed loop of one sends the second request after the first's answer (0.02: rounding).
    const closed = await runPass(requests, options('closed-1'));
    const [first, second] = closed.requests;
    expect(second?.sentAtMs ?? 0).toBeGreaterThanOrEqual((first?.sentAtMs ?? 0) + (first?.e2eMs ?? 0) - 0.02);
  });

  it('an open loop sends in order, and none before its arrival', async () => {
    // Node's timers fire up to a millisecond early, and a timer per request lets close
    // arrivals go out of order (a loaded machine's e2e record had request 1 after 2 and 3).
    const offsetsMs = requests.map((_, i) => Math.round(i * 1.37 * 100) / 100);
    for (let round = 0; round < 5; round++) {
      const pass = await runPass(requests, {
        ...options(`on-time-${round}`),
        pace: { kind: 'open', offsetsMs },
      });
      const sent = pass.requests.map((r) => r.sentAtMs ?? -1);
      for (const [i, at] of sent.entries()) expect(at).toBeGreaterThanOrEqual(offsetsMs[i] ?? 0);
    }
    // A timer source that ends the first wait last (the worst it can do): still in order.
    let calls = 0;
    const late = await runPass(requests, {
      ...options('late-first'),
      pace: { kind: 'open', offsetsMs: [0, 100, 101] },
      sleep: (ms) => sleepFor(calls++ === 0 ? ms + 30 : 0),
    });
    const sent = late.requests.map((r) => r.sentAtMs ?? -1);
    expect([...sent].sort((a, b) => a - b)).toEqual(sent);
  });

  it('a disaggregated arm: each request goes to the prefill and the decode with one room', async () => {
    const prefill = await startSim([
      '--model-path',
      'acme/qual-sim',
      '--disaggregation-mode',
      'prefill',
      '--disaggregation-bootstrap-port',
      '0',
    ]);
    const decode = await startSim([
      '--model-path',
      'acme/qual-sim',
      '--disaggregation-mode',
      'decode',
      '--sim-pd-timeout-ms',
      '2000',
    ]);
    try {
      const pair = {
        ...options('pd-1', decode.url),
        prefill: {
          pod: 'p-0',
          url: prefill.url,
          bootstrapHost: '127.0.0.1',
          bootstrapPort: bootstrapPortOf(prefill),
        },
      };
      // Without the prefill half the decode refuses the request (no bootstrap fields).
      const alone = await runPass(requests.slice(0, 1), options('pd-0', decode.url));
      expect(alone.requests[0]?.ok).toBe(false);
      const cold = await runPass(requests, pair);
      const warm = await runPass(requests, pair);
      expect([...cold.requests, ...warm.requests].every((r) => r.ok && r.completionTokens === 4)).toBe(true);
      // The decode reports the prefill's cache: nothing in a fresh salt, the repeat cached.
      expect(cold.requests[0]?.cachedTokens).toBe(0);
      for (const r of warm.requests) expect(r.cachedTokens).toBeGreaterThan(0);
      // A prefill that is not there fails the request, with the prefill named.
      const broken = await runPass(requests.slice(0, 1), {
        ...pair,
        salt: 'pd-2',
        prefill: { ...pair.prefill, url: 'http://127.0.0.1:1' },
      });
      expect(broken.requests[0]?.ok).toBe(false);
      expect(broken.requests[0]?.error).toMatch(/prefill p-0|POST \/generate/);
    } finally {
      await prefill.close();
      await decode.close();
    }
  });
});
