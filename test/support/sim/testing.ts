// Test helpers: start a simulator in-process on a free port, on virtual time.

import { InstantClock } from '../../sim/clock.ts';
import { parseSimArgs } from '../../sim/config.ts';
import { SimServer, silentLogger } from '../../sim/server.ts';

export interface RunningSim {
  readonly url: string;
  readonly server: SimServer;
  readonly crashes: { count: number };
  readonly clock: InstantClock;
  /** Resolve once `n` requests wait in the engine (poll on event-loop turns, no timers). */
  untilWaiting(n: number): Promise<void>;
  close(): Promise<void>;
}

export async function startSim(argv: readonly string[]): Promise<RunningSim> {
  const parsed = parseSimArgs(['--port', '0', ...argv]);
  if (!parsed.ok) throw new Error(parsed.error);
  const crashes = { count: 0 };
  const clock = new InstantClock();
  const server = new SimServer(parsed.value, {
    clock,
    logger: silentLogger,
    crash: () => void crashes.count++,
    toWallMs: (ms) => ms,
  });
  const port = await server.listen();
  const untilWaiting = async (n: number): Promise<void> => {
    for (let i = 0; i < 100_000 && server.engine.snapshot().numWaitingReqs < n; i++) {
      await new Promise((r) => setImmediate(r));
    }
  };
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    crashes,
    clock,
    untilWaiting,
    close: () => server.close(),
  };
}

export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: unknown; headers: Headers }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON (e.g. plain-text bodies)
  }
  return { status: res.status, json, headers: res.headers };
}

/** POST and collect the SSE `data:` payloads (the last one is "[DONE]"). */
export async function postSse(
  url: string,
  body: unknown,
): Promise<{ status: number; events: string[]; headers: Headers }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const events = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  return { status: res.status, events, headers: res.headers };
}

/** A free TCP port (for a bootstrap port that must be known before launch). */
export async function findFreePort(): Promise<number> {
  const net = await import('node:net');
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}
