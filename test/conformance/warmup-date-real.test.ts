// The chat template's variable parts, on the real SGLang 0.5.23 server (CPU, `kit serve`): a
// template that writes the date at the top of the system block, as Llama 3.x's do ("Today
// Date: <date_string>", the day's date from strftime_now unless the caller gives one), renders
// a warm-up document differently on another day. The warm-up renders each document through the
// runtime's /tokenize with two date_strings (render.ts) and says so; the tiny model's own
// template, without a date, is in warmup-real.test.ts (no warning).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkDateVariance } from '../../operator/src/controllers/cachepolicy/render.ts';
import { sendWarmupDocuments } from '../../operator/src/controllers/cachepolicy/warmup-send.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';

// The tiny model's template with Llama 3.x's date logic in front of the system message.
const DATED_TEMPLATE = [
  '{%- if not date_string is defined %}{%- if strftime_now is defined %}',
  '{%- set date_string = strftime_now("%d %b %Y") %}{%- else %}{%- set date_string = "26 Jul 2024" %}',
  '{%- endif %}{%- endif %}',
  "{%- for m in messages %}{%- if m['role'] == 'system' %}",
  "{{ '<|system|>Today Date: ' + date_string + ' ' + m['content'] }}",
  "{%- else %}{{ '<|' + m['role'] + '|>' + m['content'] }}{%- endif %}{%- endfor %}",
  "{%- if add_generation_prompt %}{{ '<|assistant|>' }}{%- endif %}",
].join('');
const HANDBOOK = 'the quick brown fox jumps over the lazy dog '.repeat(20);

describe('warm-up on a real server whose chat template writes the date', () => {
  let real: RealSglang;
  let dir = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cacheroute-dated-template-'));
    const template = join(dir, 'dated.jinja');
    writeFileSync(template, DATED_TEMPLATE);
    real = await startRealSglang({
      args: ['--skip-server-warmup', '--served-model-name', 'llama-8b', '--chat-template', template],
    });
  });
  afterAll(async () => {
    await real?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('says the document renders differently on another day, and from which token', async () => {
    const signal = new AbortController().signal;
    const varies = await checkDateVariance(real.url, 'handbook', HANDBOOK, { timeoutMs: 30_000, signal });
    // The header renders alike up to the date, where the two part: before the document's ~200
    // tokens, so a request on another day shares none of the document (14 tokens in, here).
    expect(varies).toMatch(/^handbook: the chat template writes date_string into the prompt/);
    const from = Number(/differ from token (\d+)/.exec(varies ?? '')?.[1]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThan(50);

    // The warm-up itself still runs, and carries the warning to the policy's status.
    const outcome = await sendWarmupDocuments(
      {
        key: 'ns/real#0',
        namespace: 'ns',
        deployment: 'llama',
        pod: 'real',
        restartCount: 0,
        fingerprint: 'fp1',
        model: 'llama-8b',
        url: real.url,
        salt: 's',
        role: 'standalone',
        l3: false,
        pageSize: 1,
      },
      [HANDBOOK],
      { timeoutMs: 60_000, signal, apiKey: undefined },
    );
    expect(outcome).toMatchObject({ ok: true, source: 'prefill' });
    expect(outcome.ok && outcome.warnings).toEqual([
      expect.stringMatching(/^warmup\.documents\[0\]: .*date_string/),
    ]);
  });
});
