// Prefill/decode handshake between simulators.
//
// A prefill-mode simulator runs a bootstrap server on
// --disaggregation-bootstrap-port (as SGLang's prefill does) and marks a
// room done when that room's prefill ends. A decode-mode simulator holding a
// request with bootstrap_host/port/room long-polls that server; the request
// decodes only once the prefill of the same room is done (and reports the
// prefill's cached tokens as its own, as SGLang's decode does), else it aborts
// after --sim-pd-timeout-ms (SGLang aborts with a KV transfer error).
// bootstrap_host 2.2.2.2 is SGLang's fake host of health checks and warmup:
// such requests do not wait.

import http from 'node:http';
import { z } from 'zod';
import type { CachedSplit } from './engine.ts';

export const FAKE_BOOTSTRAP_HOST = '2.2.2.2';
const ROOM_TTL_MS = 10 * 60_000;
const NOTHING_CACHED: CachedSplit = { device: 0, host: 0 };

export class RoomRegistry {
  readonly #done = new Map<string, { readonly at: number; readonly cached: CachedSplit }>();
  readonly #waiters = new Map<string, ((cached: CachedSplit) => void)[]>();

  /** The room's prefill is over; `cached` is what it found in its cache (the decode reports it). */
  complete(room: string, nowWallMs: number, cached: CachedSplit = NOTHING_CACHED): void {
    this.#done.set(room, { at: nowWallMs, cached });
    for (const wake of this.#waiters.get(room) ?? []) wake(cached);
    this.#waiters.delete(room);
    for (const [r, { at }] of this.#done) {
      if (at > nowWallMs - ROOM_TTL_MS) break;
      this.#done.delete(r);
    }
  }

  isDone(room: string): boolean {
    return this.#done.has(room);
  }

  /** Resolves with the prefill's cached split when the room is done within `timeoutMs` (wall), else undefined. */
  wait(room: string, timeoutMs: number): Promise<CachedSplit | undefined> {
    const done = this.#done.get(room);
    if (done) return Promise.resolve(done.cached);
    return new Promise((resolve) => {
      const wake = (cached: CachedSplit): void => {
        clearTimeout(timer);
        resolve(cached);
      };
      const timer = setTimeout(() => {
        const list = this.#waiters.get(room) ?? [];
        this.#waiters.set(
          room,
          list.filter((w) => w !== wake),
        );
        resolve(undefined);
      }, timeoutMs);
      const list = this.#waiters.get(room) ?? [];
      list.push(wake);
      this.#waiters.set(room, list);
    });
  }
}

/** The prefill side's bootstrap server: GET /sim/bootstrap/wait?room=R&timeout_ms=T. */
export function createBootstrapServer(registry: RoomRegistry): http.Server {
  return http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const room = url.searchParams.get('room');
    const timeout = Number(url.searchParams.get('timeout_ms') ?? '0');
    if (url.pathname !== '/sim/bootstrap/wait' || room === null || !(timeout >= 0)) {
      res.writeHead(404).end();
      return;
    }
    registry.wait(room, timeout).then(
      (cached) => {
        res
          .writeHead(cached ? 200 : 408, { 'content-type': 'application/json' })
          .end(JSON.stringify({ room, ready: cached !== undefined, cached: cached ?? null }));
      },
      () => res.writeHead(500).end(),
    );
  });
}

const PrefillAnswer = z.object({ cached: z.object({ device: z.number(), host: z.number() }) });

/**
 * The decode side: does the prefill at host:port finish `room` within `timeoutMs` (wall)?
 * Resolves with what the prefill found cached (SGLang's decode reports the prefill's
 * cached tokens as its own), or undefined when it did not finish in time.
 */
export function waitForPrefill(
  host: string,
  port: number,
  room: string,
  timeoutMs: number,
): Promise<CachedSplit | undefined> {
  return new Promise((resolve) => {
    const req = http.get(
      {
        host,
        port,
        path: `/sim/bootstrap/wait?room=${encodeURIComponent(room)}&timeout_ms=${Math.ceil(timeoutMs)}`,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          if (res.statusCode !== 200) return resolve(undefined);
          const parsed = PrefillAnswer.safeParse(safeJson(Buffer.concat(chunks).toString('utf8')));
          resolve(parsed.success ? parsed.data.cached : NOTHING_CACHED);
        });
      },
    );
    req.setTimeout(timeoutMs + 1000, () => req.destroy());
    req.on('error', () => {
      // The prefill is unreachable: retry until the deadline, as a decode keeps polling its bootstrap.
      if (timeoutMs <= 200) resolve(undefined);
      else setTimeout(() => void waitForPrefill(host, port, room, timeoutMs - 200).then(resolve), 200);
    });
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
