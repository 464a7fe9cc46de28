// The gateway's /status page in a real headless Chromium, in front of the
// SGLang simulator: the page lists the endpoints with their state, and its
// own refresh shows the served count and the runtime-reported cache-hit rate
// move after requests. CACHEROUTE_STATUS_SCREENSHOT=<file.png> keeps a
// screenshot of the page after the requests.

import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { build } from '../../gateway/src/app.ts';
import { StaticRoutingTable, type ModelRoute } from '../../gateway/src/routing/table.ts';
import { postJson, startSim, type RunningSim } from '../support/sim/testing.ts';
import { startChromium, type Chromium } from '../support/chromium.ts';
import { eventually } from '../support/kubectl.ts';

let sim: RunningSim | undefined;
let app: FastifyInstance | undefined;
let chromium: Chromium | undefined;

afterEach(async () => {
  await chromium?.stop();
  await app?.close();
  await sim?.close();
  chromium = app = sim = undefined;
});

const cell = (endpoint: string, field: string): string =>
  `document.querySelector('tr[data-endpoint="${endpoint}"] [data-field="${field}"]')?.textContent ?? null`;

describe('gateway /status in Chromium', () => {
  it('shows the endpoints, and after requests the served count and cache-hit rate', async () => {
    sim = await startSim(['--model-path', 'm', '--enable-cache-report', '--enable-metrics']);
    const endpoint = { role: 'standalone', fingerprint: 'fp1', ready: true } as const;
    const route: ModelRoute = {
      model: 'llama-3-8b',
      deployment: 'team-a/llama',
      fingerprint: 'fp1',
      salt: 'team-a',
      routing: RoutingSettings.parse({ policy: 'cache-aware' }),
      admission: Admission.parse({ maxConcurrency: 16, maxQueue: 64 }),
      reuse: ResultReuse.parse({}),
      endpoints: [
        { id: 'llama-0', url: sim.url, verified: true, ...endpoint },
        { id: 'llama-1-unverified', url: sim.url, verified: false, ...endpoint },
      ],
    };
    app = build({ table: new StaticRoutingTable([route]), scrapeIntervalMs: 200 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const gw = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

    chromium = await startChromium();
    const page = await chromium.newPage();
    await page.goto(`${gw}/status`);
    expect(await page.evaluate<string>('document.title')).toBe('cacheroute gateway status');
    expect(await page.evaluate(cell('llama-0', 'served'))).toBe('0');
    expect(await page.evaluate(cell('llama-0', 'cache-hit-rate'))).toBe('—');
    const unverified = await page.evaluate<string>(
      `document.querySelector('tr[data-endpoint="llama-1-unverified"]').textContent`,
    );
    expect(unverified).toContain('unverified');
    expect(unverified).toContain('not routed');
    expect(await page.evaluate<string>('document.querySelector("main").textContent')).toContain(
      'cache-aware',
    );

    // A shared 1000-token prefix: the second request is mostly a cache hit in the runtime.
    const prompt = Array.from({ length: 1000 }, (_, i) => 300 + i);
    for (const tail of [[], [5000, 5001, 5002]]) {
      const r = await postJson(`${gw}/generate`, {
        model: 'llama-3-8b',
        input_ids: [...prompt, ...tail],
        sampling_params: { max_new_tokens: 2 },
      });
      expect(r.status).toBe(200);
    }

    // No reload: the page's own refresh brings the new numbers in.
    await eventually(
      async () => {
        expect(await page.evaluate(cell('llama-0', 'served'))).toBe('2');
        expect(await page.evaluate(cell('llama-0', 'cache-hit-rate'))).toMatch(/^\d+\.\d% \(\d+\/2003\)$/);
        expect(await page.evaluate(cell('llama-0', 'runtime-queue'))).toBe('0');
      },
      { timeoutMs: 15_000, intervalMs: 250 },
    );
    const hit = await page.evaluate<string>(cell('llama-0', 'cache-hit-rate'));
    expect(Number(/^([\d.]+)%/.exec(hit)?.[1])).toBeGreaterThan(40);
    expect(await page.evaluate(cell('llama-1-unverified', 'served'))).toBe('0');
    expect(page.errors).toEqual([]); // no script error, no CSP violation

    const shot = process.env['CACHEROUTE_STATUS_SCREENSHOT'] ?? join(chromium.dir, 'status.png');
    await page.screenshot(shot);
    await page.close();
  });
});
