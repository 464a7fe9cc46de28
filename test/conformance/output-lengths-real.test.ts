// The picker learns answers' output lengths from the real SGLang 0.5.23
// server's KV events (gateway/src/kv-index/output-attribution.ts, ADR 0049):
// a finishing request stores its prompt and output but the last token, page
// aligned, extending its prompt's last whole page. The picker's own KV index
// fleet follows the real server's stream; each request is expected as the
// picker expects the ones it routes, and what the events measure must hold the
// completion_tokens the server reports: within a page at page size 16, exact
// at page size 1.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvIndexFleet } from '../../gateway/src/kv-index/fleet.ts';
import type { MeasuredOutput } from '../../gateway/src/kv-index/output-attribution.ts';
import type { RouteEndpoint } from '../../gateway/src/routing/table.ts';
import { withFreshPorts } from '../support/fresh-ports.ts';
import { kvEventsConfigArgs } from '../support/kv-events-config.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';
import { postJson } from '../support/sim/testing.ts';

const SALT = 'tenant-a';

interface Followed {
  readonly real: RealSglang;
  readonly fleet: KvIndexFleet;
  readonly endpoint: RouteEndpoint;
  readonly measured: Map<string, MeasuredOutput>;
}

/** The real server at `page` tokens a page, publishing KV events the picker's fleet follows. */
async function startFollowed(page: number): Promise<Followed> {
  const { real, kvPort, replayPort } = await withFreshPorts(
    2,
    async ([kvPort = 0, replayPort = 0]) => {
      const args = ['--page-size', String(page), ...kvEventsConfigArgs({ kv: kvPort, replay: replayPort })];
      return { real: await startRealSglang({ args: [...args, '--skip-server-warmup'] }), kvPort, replayPort };
    },
    { what: 'sglang (KV events)' },
  );
  const endpoint: RouteEndpoint = {
    id: `real-${page}`,
    url: real.url,
    role: 'standalone',
    fingerprint: 'fp',
    verified: true,
    ready: true,
    generation: 'g',
    events: {
      kv: [`tcp://127.0.0.1:${kvPort}`],
      replay: [`tcp://127.0.0.1:${replayPort}`],
      topic: 'kv',
      blockSize: page,
    },
  };
  const fleet = new KvIndexFleet();
  const measured = new Map<string, MeasuredOutput>();
  fleet.onOutput((_e, m) => measured.set(m.id, m));
  fleet.sync([endpoint], new Set([endpoint.id]));
  return { real, fleet, endpoint, measured };
}

/** A prompt of `n` ids inside the tiny model's vocabulary (430), distinct per `seed`. */
function promptOf(n: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => 10 + ((seed * 97 + i * 31) % 400));
}

/** Sends one request as the picker routes it (expected, then ended); its completion_tokens. */
async function send(f: Followed, id: string, prompt: number[], maxNewTokens: number): Promise<number> {
  f.fleet.match([f.endpoint], prompt, SALT);
  f.fleet.expectOutput(f.endpoint.id, id, prompt, SALT, maxNewTokens);
  const r = await postJson(`${f.real.url}/generate`, {
    input_ids: prompt,
    sampling_params: { max_new_tokens: maxNewTokens, temperature: 0, ignore_eos: true },
    cache_salt: SALT,
  });
  expect(r.status).toBe(200);
  f.fleet.outputEnded(id);
  return (r.json as { meta_info: { completion_tokens: number } }).meta_info.completion_tokens;
}

async function measuredOf(f: Followed, id: string): Promise<MeasuredOutput> {
  // SGLang publishes at its next prefill, idle pass or 40th decode step.
  for (let i = 0; i < 1200 && !f.measured.has(id); i++) await new Promise((r) => setTimeout(r, 25));
  const m = f.measured.get(id);
  if (!m)
    throw new Error(`no finishing store measured ${id} in 30 s (ambiguous: ${f.fleet.ambiguousOutputs})`);
  return m;
}

describe('Output lengths from the real SGLang server KV events', () => {
  let paged: Followed;
  let single: Followed;

  beforeAll(async () => {
    [paged, single] = await Promise.all([startFollowed(16), startFollowed(1)]);
    for (const f of [paged, single])
      for (let i = 0; i < 400 && !f.fleet.usability(f.endpoint.id).usable; i++)
        await new Promise((r) => setTimeout(r, 25));
  }, 600_000);

  afterAll(async () => {
    // What the servers said, for a failure's reader (their directories go with them).
    for (const f of [paged, single])
      if (f)
        process.stderr.write(`--- ${f.endpoint.id}\n${readFileSync(f.real.logPath, 'utf8').slice(-6000)}\n`);
    await Promise.all(
      [paged, single].map(async (f) => {
        await f?.fleet.close();
        await f?.real.stop();
      }),
    );
  });

  it('measures each answer within a page at page size 16 (prompt tails 8, 1 and 0)', async () => {
    const cases: [prompt: number, output: number][] = [
      [40, 10],
      [33, 29],
      [48, 57],
      [70, 100],
    ];
    for (const [i, [n, out]] of cases.entries()) {
      const id = `p16-${i}`;
      const completion = await send(paged, id, promptOf(n, i), out);
      expect(completion).toBe(out);
      const m = await measuredOf(paged, id);
      expect(m.min).toBeLessThanOrEqual(completion);
      expect(m.max).toBeGreaterThanOrEqual(completion);
      expect(m.max - m.min).toBeLessThan(16);
      expect(m.cap).toBe(out);
    }
  });

  it('measures each answer exactly at page size 1', async () => {
    for (const [i, out] of [3, 17, 64, 129].entries()) {
      const id = `p1-${i}`;
      const completion = await send(single, id, promptOf(20 + i * 7, 100 + i), out);
      expect(await measuredOf(single, id)).toEqual({ id, min: completion, max: completion, cap: out });
    }
  });

  it('attributes nothing it cannot tell apart: the same prompt twice at once', async () => {
    const prompt = promptOf(50, 7);
    const before = single.fleet.ambiguousOutputs;
    // Greedy: the same output, one 40 tokens long and one 80. The short one's store could be either's;
    // the long one's extends the short one's, not its prompt.
    const both = Promise.all([send(single, 'twin-a', prompt, 40), send(single, 'twin-b', prompt, 80)]);
    await both;
    // A later request's store comes after theirs on the stream: once it is measured, theirs were read.
    await send(single, 'after-twins', promptOf(30, 8), 20);
    await measuredOf(single, 'after-twins');
    expect(single.measured.has('twin-a')).toBe(false);
    expect(single.measured.has('twin-b')).toBe(false);
    expect(single.fleet.ambiguousOutputs).toBe(before + 1);
  });
});
