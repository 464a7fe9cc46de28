// How old a replica's view of another's load is when a change reaches it, on
// real sockets: R load exchanges (fleet/load-exchange.ts) on loopback, each
// changing its share of a random runtime every --interval-ms, for --seconds.
// Prints one JSON line: the lag's p50/p99/max (ms) over every caught-up change.
// With --out FILE it also writes the distribution (every 0.1% quantile, and the
// host's load average) for the virtual tier bench to draw each message's delay
// from (`bench-tier-virtual.ts --exchange-ms measured:FILE`, exchange-delay.ts).
//
//   node test/bench/bench-exchange-lag.ts [--replicas 3] [--seconds 5] [--interval-ms 2] [--out FILE]

import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { LoadExchange } from '../../gateway/src/fleet/load-exchange.ts';
import { percentile } from './replay-stats.ts';

const { values } = parseArgs({
  options: {
    replicas: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '5' },
    'interval-ms': { type: 'string', default: '2' },
    out: { type: 'string' },
  },
});
const R = Number(values.replicas);
const lags: number[] = [];
const xs = Array.from(
  { length: R },
  (_, i) => new LoadExchange({ self: `gw-${i}`, onLag: (ms) => lags.push(ms) }),
);
const addresses = await Promise.all(xs.map((x) => x.bind('tcp://127.0.0.1:*')));
for (const x of xs) x.connect(addresses);
await new Promise((r) => setTimeout(r, 500)); // subscriptions settle (ZeroMQ's slow joiner)
lags.length = 0;
let n = 0;
const timer = setInterval(() => {
  const x = xs[n % R] as LoadExchange;
  x.update(`w${n % 4}`, { inFlight: n % 7, prefillTokens: (n * 131) % 9000, decodeTokens: (n * 17) % 3000 });
  n++;
}, Number(values['interval-ms']));
await new Promise((r) => setTimeout(r, Number(values.seconds) * 1000));
clearInterval(timer);
await new Promise((r) => setTimeout(r, 200));
for (const x of xs) x.close();
const r3 = (v: number): number => Number(v.toFixed(3));
const load = loadavg().map((v) => Number(v.toFixed(2)));
if (values.out !== undefined) {
  const sorted = [...lags].sort((a, b) => a - b);
  const quantiles = Array.from({ length: 1001 }, (_, i) => [
    i / 1000,
    r3(sorted[Math.min(sorted.length - 1, Math.round((i / 1000) * (sorted.length - 1)))] ?? 0),
  ]);
  writeFileSync(
    values.out,
    `${JSON.stringify({ replicas: R, changes: n, heard: lags.length, loadavg: load, quantiles })}\n`,
  );
}
console.log(
  JSON.stringify({
    replicas: R,
    changes: n,
    heard: lags.length,
    lag_p50_ms: r3(percentile(lags, 50)),
    lag_p99_ms: r3(percentile(lags, 99)),
    lag_max_ms: r3(Math.max(...lags)),
    loadavg: load,
  }),
);
