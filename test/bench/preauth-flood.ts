// What unauthenticated clients cost the gateway: N requests (default 100,000)
// with random paths and random model names, without an API key, against a
// gateway process on loopback; its RSS and its /metrics size before and after.
// Samples: at start, after a warm-up of --warmup requests (the series every
// status and route makes once, the heap the first requests grow), and after
// the N that follow. Bounded: it sends warm-up + N requests, stops the
// gateway it started, and exits.
//
//   node test/bench/preauth-flood.ts [--requests 100000] [--rounds 1] [--warmup 1000] [--concurrency 32] [--auth keys|open]
//
// --rounds N sends N rounds of --requests, sampling after each: RSS that
// levels off is the heap's working size, RSS that climbs round after round
// is memory kept per request.
//
// keys (the default): what anyone who reaches the API port can send. open:
// every caller is let in, so known routes parse the body and answer 404
// GW_MODEL_NOT_FOUND for the made-up names. Prints one JSON line.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { spawnGateway, writeRoutesFile } from '../support/gateway/gateway-process.ts';
import { createRng } from '../support/gateway/rng.ts';

const Flags = z.object({
  requests: z.coerce.number().int().min(1).max(10_000_000),
  warmup: z.coerce.number().int().min(0).max(1_000_000),
  rounds: z.coerce.number().int().min(1).max(100),
  concurrency: z.coerce.number().int().min(1).max(1024),
  auth: z.enum(['keys', 'open']),
});

const PATHS = ['/v1/chat/completions', '/v1/completions', '/generate'];

interface Sample {
  readonly rssMB: number;
  /** V8's heap in use (the process metrics), as the last GC left it plus what was allocated since. */
  readonly heapUsedMB: number;
  readonly metricsBytes: number;
  readonly metricsSeries: number;
  /** Series of the gateway's own metrics, without Node.js's (a GC kind seen for the first time adds a histogram). */
  readonly gatewaySeries: number;
}

const PROCESS_SERIES = /^cacheroute_gateway_(nodejs|process)_/;

async function sample(pid: number, adminUrl: string): Promise<Sample> {
  const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
  const rssKb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  const heap = /^cacheroute_gateway_nodejs_heap_size_used_bytes (\S+)$/m.exec(metrics)?.[1];
  const series = metrics.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
  return {
    rssMB: Math.round(Number(rssKb) / 1024),
    heapUsedMB: Math.round(Number(heap) / 2 ** 20),
    metricsBytes: Buffer.byteLength(metrics),
    metricsSeries: series.length,
    gatewaySeries: series.filter((l) => !PROCESS_SERIES.test(l)).length,
  };
}

/** Request i: a random path one time in four, else a generation route; always a random model. */
function buildRequest(rng: () => number, i: number): { url: string; body: string } {
  const word = (): string => Math.floor(rng() * 2 ** 48).toString(36);
  const url = i % 4 === 0 ? `/${word()}/${word()}` : (PATHS[i % PATHS.length] ?? '/generate');
  const body = JSON.stringify({ model: word(), messages: [{ role: 'user', content: word() }], text: word() });
  return { url, body };
}

async function flood(
  baseUrl: string,
  requests: number,
  concurrency: number,
  seed: number,
): Promise<Record<string, number>> {
  const rng = createRng(seed);
  const statuses: Record<string, number> = {};
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < requests; i = next++) {
      const { url, body } = buildRequest(rng, i);
      const res = await fetch(`${baseUrl}${url}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      }).catch(() => undefined);
      await res?.arrayBuffer();
      const key = res ? String(res.status) : 'error';
      statuses[key] = (statuses[key] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return statuses;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '100000' },
      warmup: { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '1' },
      concurrency: { type: 'string', default: '32' },
      auth: { type: 'string', default: 'keys' },
    },
  });
  const flags = Flags.parse(values);
  // Nothing listens on the discard port: no request of the flood may reach a runtime anyway.
  const routes = writeRoutesFile('http://127.0.0.1:9');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cacheroute-flood-'));
  const tenants = path.join(dir, 'tenants.json');
  writeFileSync(
    tenants,
    JSON.stringify([{ namespace: 'ns', name: 't', models: ['m'], keys: ['k'.repeat(40)] }]),
  );
  const auth = flags.auth === 'keys' ? ['--auth', 'keys', '--tenants', tenants] : ['--auth', 'open'];
  const gw = await spawnGateway(routes.path, auth, { admin: true });
  try {
    const pid = gw.proc.pid ?? 0;
    const start = await sample(pid, gw.adminUrl);
    await flood(gw.url, flags.warmup, flags.concurrency, 1);
    const before = await sample(pid, gw.adminUrl);
    const started = Date.now();
    const statuses: Record<string, number> = {};
    const after: Sample[] = [];
    for (let r = 0; r < flags.rounds; r++) {
      const round = await flood(gw.url, flags.requests, flags.concurrency, 20261205 + r);
      for (const [k, n] of Object.entries(round)) statuses[k] = (statuses[k] ?? 0) + n;
      after.push(await sample(pid, gw.adminUrl));
    }
    const seconds = (Date.now() - started) / 1000;
    const report = { bench: 'preauth-flood', ...flags, seconds, statuses, start, before, after };
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    gw.proc.kill('SIGTERM');
    await gw.exited;
    routes.remove();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
