// Test helpers: start a simulator in-process on virtual time. Every port it
// binds is bound on 0 and read back, never guessed free first: the HTTP port and
// the event sockets always (--port 0, --sim-ephemeral-event-ports: configured
// event ports are placeholders), a prefill's bootstrap port unless the test
// gives one (SGLang's default, 8998, would be shared by every prefill); read
// them from `url`, `events` and `bootstrapPort`.

import { InstantClock } from '../../sim/clock.ts';
import { parseSimArgs, type SimConfig } from '../../sim/config.ts';
import { SimServer, silentLogger } from '../../sim/server.ts';
import { kvEventsConfigArgs, PLACEHOLDER_EVENT_PORTS } from '../kv-events-config.ts';

/** The simulator's event sockets, as a client on this host reaches them (tcp://127.0.0.1:PORT). */
export interface SimEventEndpoints {
  readonly kv: string | null;
  readonly replay: string | null;
  readonly load: string | null;
}

export interface RunningSim {
  readonly url: string;
  /** The prefill bootstrap server's bound port; null unless --disaggregation-mode prefill. */
  readonly bootstrapPort: number | null;
  readonly events: SimEventEndpoints;
  readonly server: SimServer;
  readonly crashes: { count: number };
  readonly clock: InstantClock;
  /** Resolve once `n` requests wait in the engine (poll on event-loop turns, no timers). */
  untilWaiting(n: number): Promise<void>;
  close(): Promise<void>;
}

/** `env`: the server's environment (a HiCache `file` tier's SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR). */
export async function startSim(
  argv: readonly string[],
  { env }: { env?: Readonly<Record<string, string>> } = {},
): Promise<RunningSim> {
  const config = parseOnPortZero(argv);
  const crashes = { count: 0 };
  const clock = new InstantClock();
  const server = new SimServer(config, {
    clock,
    logger: silentLogger,
    crash: () => void crashes.count++,
    toWallMs: (ms) => ms,
    ...(env ? { env } : {}),
  });
  const port = await server.listen();
  const untilWaiting = async (n: number): Promise<void> => {
    for (let i = 0; i < 100_000 && server.engine.snapshot().numWaitingReqs < n; i++) {
      await new Promise((r) => setImmediate(r));
    }
  };
  const bound = server.kvEvents?.bound;
  return {
    url: `http://127.0.0.1:${port}`,
    bootstrapPort: server.bootstrapPort,
    events: {
      kv: reachableOnLoopback(bound?.kv ?? null),
      replay: reachableOnLoopback(bound?.replay ?? null),
      load: reachableOnLoopback(bound?.load ?? null),
    },
    server,
    crashes,
    clock,
    untilWaiting,
    close: () => server.close(),
  };
}

/** A simulator publishing KV events, with where a client reaches the sockets it bound. */
export interface SimWithKvEvents extends RunningSim {
  /** Its KV event socket, tcp://127.0.0.1:PORT. */
  readonly kv: string;
  /** Its replay socket, tcp://127.0.0.1:PORT. */
  readonly replay: string;
}

/**
 * A simulator started with `argv` and KV events on, with a replay, under topic 'kv': the
 * configured ports are placeholders, the sockets bound on ports the kernel picks and read back.
 */
export async function startSimWithKvEvents(argv: readonly string[]): Promise<SimWithKvEvents> {
  const sim = await startSim([...argv, ...kvEventsConfigArgs(PLACEHOLDER_EVENT_PORTS)]);
  return { ...sim, kv: eventEndpoint(sim, 'kv'), replay: eventEndpoint(sim, 'replay') };
}

/** The events a routing table names for `sim` at `blockSize` tokens a page. */
export function routeEventsOf(
  sim: SimWithKvEvents,
  blockSize: number,
): { kv: string[]; replay: string[]; topic: string; blockSize: number } {
  return { kv: [sim.kv], replay: [sim.replay], topic: 'kv', blockSize };
}

function parseOnPortZero(argv: readonly string[]): SimConfig {
  const parsed = parseSimArgs(['--port', '0', '--sim-ephemeral-event-ports', ...argv]);
  if (!parsed.ok) throw new Error(parsed.error);
  const cfg = parsed.value;
  if (cfg.sglang.disaggregation_mode !== 'prefill' || cfg.explicit.has('disaggregation_bootstrap_port'))
    return cfg;
  return parseOnPortZero(['--disaggregation-bootstrap-port', '0', ...argv]);
}

/** A prefill simulator's bootstrap port (started with --disaggregation-bootstrap-port 0); throws for any other. */
export function bootstrapPortOf(sim: RunningSim): number {
  if (sim.bootstrapPort === null)
    throw new Error('the simulator runs no bootstrap server: start it with --disaggregation-mode prefill');
  return sim.bootstrapPort;
}

/** Where a client reaches one of the simulator's event sockets; throws when it bound none. */
export function eventEndpoint(sim: RunningSim, socket: keyof SimEventEndpoints): string {
  const endpoint = sim.events[socket];
  if (endpoint === null)
    throw new Error(`the simulator bound no ${socket} event socket: check --kv-events-config`);
  return endpoint;
}

/** A libzmq bound address (tcp://0.0.0.0:P, tcp://[::]:P, tcp://127.0.0.1:P) as tcp://127.0.0.1:P. */
export function reachableOnLoopback(bound: string | null): string | null {
  if (bound === null) return null;
  const port = /:(\d+)$/.exec(bound)?.[1];
  if (port === undefined) throw new Error(`not a tcp:// address with a port: ${bound}`);
  return `tcp://127.0.0.1:${port}`;
}

/** The port of a tcp://host:port address. */
export function portOf(endpoint: string): number {
  const port = /:(\d+)$/.exec(endpoint)?.[1];
  if (port === undefined) throw new Error(`not an address with a port: ${endpoint}`);
  return Number(port);
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
