// Router overhead: tiny non-streaming chat requests (max_tokens 1, short
// prompt) against a zero-latency simulator, directly and through each router,
// from one client in one run. Open loop at a fixed rate; targets take turns in
// rounds of `roundMs` so slow drift of the (shared) machine hits all alike.

import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { percentile } from './replay-stats.ts';

/**
 * The overhead phase's simulator: prefill, decode and host loads take no time, so what a
 * request costs beyond `direct` is the router's (the page size is the caller's).
 */
export const ZERO_LATENCY_SIM_ARGS: readonly string[] = [
  '--sim-prefill-tps',
  '1e12',
  '--sim-decode-base-ms',
  '0',
  '--sim-decode-per-req-ms',
  '0',
  '--sim-host-load-tps',
  '1e12',
];

export interface OverheadTarget {
  readonly name: string;
  readonly url: string;
  /** Process groups whose CPU time is the target's cost (a router's processes; none for `direct`). */
  readonly pgids?: readonly number[];
  /** The same cost split by part (Envoy's and the picker's), each part's process groups. */
  readonly cpuParts?: Readonly<Record<string, readonly number[]>>;
}

export interface OverheadStats {
  readonly sent: number;
  readonly ok: number;
  readonly errors: number;
  readonly p50_ms: number;
  readonly p99_ms: number;
  readonly max_ms: number;
  /** Completed requests per second of the target's own rounds (offered: `rate`). */
  readonly rps: number;
  /** CPU time the target's processes spent per measured request (user + system), when known. */
  readonly cpu_ms_per_req?: number | undefined;
  /** `cpu_ms_per_req` by the target's parts (OverheadTarget.cpuParts), when it names them. */
  readonly cpu_ms_per_req_parts?: Readonly<Record<string, number>> | undefined;
  readonly first_error?: string | undefined;
}

export interface OverheadOptions {
  readonly model: string;
  /** Offered requests per second. */
  readonly rate: number;
  readonly roundMs: number;
  readonly rounds: number;
  /**
   * Unmeasured rotations first, each target one round per rotation as in the measured ones: JIT,
   * connection pools, and the first major collections of every process (the simulator and the
   * client are shared) fall here, not on whichever target is measured first.
   */
  readonly warmupRounds: number;
  readonly timeoutMs: number;
}

interface Sample {
  readonly ok: boolean;
  readonly ms: number;
  readonly error?: string;
}

const CLOCK_TICKS_PER_S = 100; // Linux USER_HZ: /proc/<pid>/stat counts CPU time in these

/** CPU ms used so far by every live process in `pgids` (Linux /proc; 0 elsewhere). */
export function readGroupCpuMs(pgids: readonly number[]): number {
  if (pgids.length === 0) return 0;
  const want = new Set(pgids);
  let ticks = 0;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return 0;
  }
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // gone since the listing
    }
    // Fields after the command's closing parenthesis: state is field 3, pgrp 5, utime 14, stime 15.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (want.has(Number(f[2]))) ticks += Number(f[11]) + Number(f[12]);
  }
  return (ticks * 1000) / CLOCK_TICKS_PER_S;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function postOnce(url: URL, payload: string, timeoutMs: number): Promise<Sample> {
  const start = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const done = (s: Sample): void => {
      if (settled) return;
      settled = true;
      resolve(s);
    };
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          if (text.length < 2000) text += c;
        });
        res.on('end', () => {
          const ms = performance.now() - start;
          const ok = res.statusCode === 200 && text.includes('"choices"');
          done(ok ? { ok, ms } : { ok, ms, error: `${res.statusCode ?? 0} ${text.slice(0, 200)}` });
        });
        res.on('error', (e) => done({ ok: false, ms: performance.now() - start, error: e.message }));
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', (e) => done({ ok: false, ms: performance.now() - start, error: e.message }));
    req.end(payload);
  });
}

/** Send `count` requests at `rate`/s open loop; resolves when all answered. */
async function runOpenLoop(
  url: URL,
  payload: string,
  count: number,
  rate: number,
  timeoutMs: number,
): Promise<{ samples: Sample[]; elapsedMs: number }> {
  const samples: Promise<Sample>[] = [];
  const start = performance.now();
  const interval = 1000 / rate;
  let sent = 0;
  while (sent < count) {
    const due = Math.min(count, Math.floor((performance.now() - start) / interval) + 1);
    while (sent < due) {
      samples.push(postOnce(url, payload, timeoutMs));
      sent++;
    }
    if (sent < count)
      await new Promise((r) => setTimeout(r, Math.max(0, start + sent * interval - performance.now())));
  }
  const out = await Promise.all(samples);
  return { samples: out, elapsedMs: performance.now() - start };
}

export async function measureOverhead(
  targets: readonly OverheadTarget[],
  opts: OverheadOptions,
): Promise<Record<string, OverheadStats>> {
  const payload = JSON.stringify({
    model: opts.model,
    messages: [{ role: 'user', content: 'Say hi.' }],
    max_tokens: 1,
    temperature: 0.7,
    stream: false,
  });
  const perRound = Math.max(1, Math.round((opts.rate * opts.roundMs) / 1000));
  const collected = new Map<string, Collected>();
  for (const t of targets) collected.set(t.name, { samples: [], elapsedMs: 0, cpuMs: 0, partsMs: {} });
  const readParts = (t: OverheadTarget): Record<string, number> =>
    Object.fromEntries(Object.entries(t.cpuParts ?? {}).map(([part, g]) => [part, readGroupCpuMs(g)]));
  for (let r = -opts.warmupRounds; r < opts.rounds; r++) {
    // Rotate the order each round so no target always follows the same one.
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(k + r + opts.warmupRounds) % targets.length] as OverheadTarget;
      const cpuBefore = readGroupCpuMs(t.pgids ?? []);
      const partsBefore = readParts(t);
      const res = await runOpenLoop(
        new URL('/v1/chat/completions', t.url),
        payload,
        perRound,
        opts.rate,
        opts.timeoutMs,
      );
      const c = collected.get(t.name);
      if (c && r >= 0) {
        c.samples.push(...res.samples);
        c.elapsedMs += res.elapsedMs;
        c.cpuMs += readGroupCpuMs(t.pgids ?? []) - cpuBefore;
        for (const [part, ms] of Object.entries(readParts(t)))
          c.partsMs[part] = (c.partsMs[part] ?? 0) + ms - (partsBefore[part] ?? 0);
      }
    }
  }
  const out: Record<string, OverheadStats> = {};
  for (const [name, c] of collected) {
    const target = targets.find((t) => t.name === name);
    out[name] = summarizeTarget(target, c);
  }
  return out;
}

interface Collected {
  samples: Sample[];
  elapsedMs: number;
  cpuMs: number;
  partsMs: Record<string, number>;
}

/** One target's figures from its measured rounds. */
function summarizeTarget(target: OverheadTarget | undefined, c: Collected): OverheadStats {
  const ok = c.samples.filter((s) => s.ok);
  const lat = ok.map((s) => s.ms);
  const firstError = c.samples.find((s) => !s.ok)?.error;
  return {
    sent: c.samples.length,
    ok: ok.length,
    errors: c.samples.length - ok.length,
    p50_ms: round3(percentile(lat, 50)),
    p99_ms: round3(percentile(lat, 99)),
    max_ms: round3(lat.length > 0 ? Math.max(...lat) : 0),
    rps: c.elapsedMs > 0 ? Number(((ok.length * 1000) / c.elapsedMs).toFixed(1)) : 0,
    ...(target?.pgids?.length && c.samples.length > 0
      ? { cpu_ms_per_req: round3(c.cpuMs / c.samples.length) }
      : {}),
    ...(target?.cpuParts && c.samples.length > 0
      ? {
          cpu_ms_per_req_parts: Object.fromEntries(
            Object.entries(c.partsMs).map(([part, ms]) => [part, round3(ms / c.samples.length)]),
          ),
        }
      : {}),
    ...(firstError === undefined ? {} : { first_error: firstError }),
  };
}

const round3 = (x: number): number => Number(x.toFixed(3));

interface CpuTimes {
  readonly busy: number;
  readonly total: number;
}

/** The machine's CPU times so far, all CPUs together (Linux /proc/stat; undefined elsewhere). */
export function readCpuTimes(): CpuTimes | undefined {
  let line: string | undefined;
  try {
    line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  } catch {
    return undefined;
  }
  // cpu  user nice system idle iowait irq softirq steal ...
  const f = (line ?? '').trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  return { busy: total - idle, total };
}

/** Busy share of all CPUs between two readings. */
export const computeBusyShare = (a: CpuTimes, b: CpuTimes): number =>
  b.total > a.total ? (b.busy - a.busy) / (b.total - a.total) : 0;

/**
 * Waits until the CPUs have been under `maxBusy` for `quietSeconds` in a row (what ran before, a
 * replay's processes exiting, must not load the first rounds), at most `timeoutMs`. Resolves with
 * how long it waited and the last second's busy share.
 */
export async function waitForQuietCpus(
  maxBusy: number,
  quietSeconds = 3,
  timeoutMs = 90_000,
): Promise<{ waitedMs: number; busy: number }> {
  const start = performance.now();
  let quiet = 0;
  let busy = 0;
  let last = readCpuTimes();
  if (!last) return { waitedMs: 0, busy: 0 };
  while (quiet < quietSeconds && performance.now() - start < timeoutMs) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = readCpuTimes();
    if (!now) break;
    busy = computeBusyShare(last, now);
    last = now;
    quiet = busy < maxBusy ? quiet + 1 : 0;
  }
  return { waitedMs: performance.now() - start, busy };
}
