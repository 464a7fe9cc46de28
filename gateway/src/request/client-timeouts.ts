// How long a client may take to send a request, and how long a connection may
// sit idle: without them (fastify's defaults are 0, none) a client that
// trickles a body, or opens connections and sends nothing, holds a socket and
// its buffers for ever, before any API key is checked.
//
// --request-timeout-seconds (default 60): the whole request, headers and body,
//   must arrive within it (Node's server.requestTimeout); the answer, however
//   long a generation runs, is not counted.
// --connection-timeout-seconds (default 600): a socket with no traffic either
//   way for this long is closed (server.timeout). A buffered answer sends
//   nothing until it is complete, so this must outlast the longest generation
//   a client waits for without streaming.

import { z } from 'zod';

export interface ClientTimeouts {
  readonly requestTimeoutMs: number;
  readonly connectionTimeoutMs: number;
}

export const DEFAULT_CLIENT_TIMEOUTS: ClientTimeouts = {
  requestTimeoutMs: 60_000,
  connectionTimeoutMs: 600_000,
};

const Seconds = z.coerce
  .number({ error: 'give a number of seconds' })
  .int('give whole seconds')
  .min(1, 'give 1 or more seconds');

export function parseClientTimeoutFlags(values: {
  readonly 'request-timeout-seconds'?: string | undefined;
  readonly 'connection-timeout-seconds'?: string | undefined;
}): { ok: true; value: ClientTimeouts } | { ok: false; error: string } {
  const out: Record<string, number> = {};
  const flags = [
    ['request-timeout-seconds', 'requestTimeoutMs'],
    ['connection-timeout-seconds', 'connectionTimeoutMs'],
  ] as const;
  for (const [flag, key] of flags) {
    const raw = values[flag];
    if (raw === undefined) continue;
    const r = Seconds.safeParse(raw);
    if (!r.success) return { ok: false, error: `--${flag}: ${r.error.issues[0]?.message ?? 'invalid'}` };
    out[key] = r.data * 1000;
  }
  return { ok: true, value: { ...DEFAULT_CLIENT_TIMEOUTS, ...out } };
}
