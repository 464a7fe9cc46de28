// Prefill/decode handshake between simulators.
//
// A prefill-mode simulator runs a bootstrap server on
// --disaggregation-bootstrap-port (as SGLang's prefill does) and marks a
// room done when that room's prefill ends. A decode-mode simulator holding a
// request with bootstrap_host/port/room long-polls that server; the request
// decodes only once the prefill of the same room is done, else it aborts
// after --sim-pd-timeout-ms (SGLang aborts with a KV transfer error).
// bootstrap_host 2.2.2.2 is SGLang's fake host of health checks and warmup:
// such requests do not wait.

import http from 'node:http';

export const FAKE_BOOTSTRAP_HOST = '2.2.2.2';
const ROOM_TTL_MS = 10 * 60_000;

export class RoomRegistry {
  readonly #done = new Map<string, number>();
  readonly #waiters = new Map<string, (() => void)[]>();

  complete(room: string, nowWallMs: number): void {
    this.#done.set(room, nowWallMs);
    for (const wake of this.#waiters.get(room) ?? []) wake();
    this.#waiters.delete(room);
    for (const [r, at] of this.#done) {
      if (at > nowWallMs - ROOM_TTL_MS) break;
      this.#done.delete(r);
    }
  }

  isDone(room: string): boolean {
    return this.#done.has(room);
  }

  /** Resolves true when the room is done within `timeoutMs` (wall), else false. */
  wait(room: string, timeoutMs: number): Promise<boolean> {
    if (this.#done.has(room)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        const list = this.#waiters.get(room) ?? [];
        this.#waiters.set(
          room,
          list.filter((w) => w !== wake),
        );
        resolve(false);
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
      (ok) => {
        res
          .writeHead(ok ? 200 : 408, { 'content-type': 'application/json' })
          .end(JSON.stringify({ room, ready: ok }));
      },
      () => res.writeHead(500).end(),
    );
  });
}

/** The decode side: does the prefill at host:port finish `room` within `timeoutMs` (wall)? */
export function waitForPrefill(
  host: string,
  port: number,
  room: string,
  timeoutMs: number,
): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(
      {
        host,
        port,
        path: `/sim/bootstrap/wait?room=${encodeURIComponent(room)}&timeout_ms=${Math.ceil(timeoutMs)}`,
      },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.setTimeout(timeoutMs + 1000, () => req.destroy());
    req.on('error', () => {
      // The prefill is unreachable: retry until the deadline, as a decode keeps polling its bootstrap.
      if (timeoutMs <= 200) resolve(false);
      else setTimeout(() => void waitForPrefill(host, port, room, timeoutMs - 200).then(resolve), 200);
    });
  });
}
