// A scriptable stand-in for one SGLang endpoint, for the gateway's own tests
// (the simulator in test/sim is the realistic one). Gates hold responses
// until a test releases them: no timers, no sleeps.

import http from 'node:http';
import type { AddressInfo } from 'node:net';

export class Gate {
  #open = false;
  #waiters: (() => void)[] = [];
  #watchers: { readonly n: number; readonly wake: () => void }[] = [];

  wait(): Promise<void> {
    if (this.#open) return Promise.resolve();
    const held = new Promise<void>((r) => this.#waiters.push(r));
    for (const w of this.#watchers.filter((x) => this.#waiters.length >= x.n)) w.wake();
    this.#watchers = this.#watchers.filter((x) => this.#waiters.length < x.n);
    return held;
  }

  /**
   * Resolves once `n` requests are held here: for a request that crosses a process (the gateway
   * as its own process), where counting event-loop turns would be a timeout in disguise.
   */
  untilWaiting(n: number): Promise<void> {
    if (this.#waiters.length >= n) return Promise.resolve();
    return new Promise((wake) => this.#watchers.push({ n, wake }));
  }

  open(): void {
    this.#open = true;
    for (const w of this.#waiters.splice(0)) w();
  }

  get waiting(): number {
    return this.#waiters.length;
  }
}

export interface Received {
  readonly path: string;
  readonly body: Record<string, unknown>;
  /** The Authorization header it came with, if any (what a runtime would check). */
  readonly authorization?: string;
}

export interface FakeUpstream {
  readonly url: string;
  readonly received: Received[];
  /** Requests whose client (the gateway) closed the connection before the end. */
  readonly aborted: { count: number };
  /** 'ok' | 'fail' (500) | 'break' (the answer dies after its first bytes: a stream chunk, half a body) */
  mode: 'ok' | 'fail' | 'break';
  /** Held before the response starts. */
  headGate: Gate;
  /** Held between the first and the last stream chunk. */
  streamGate: Gate;
  cachedTokens: number;
  /** Added before the response starts and again before a stream's last chunk (a generation's time). */
  latencyMs: number;
  close(): Promise<void>;
}

export async function startFakeUpstream(): Promise<FakeUpstream> {
  const state: Omit<FakeUpstream, 'url' | 'close'> = {
    received: [],
    aborted: { count: 0 },
    mode: 'ok',
    headGate: new Gate(),
    streamGate: new Gate(),
    cachedTokens: 4,
    latencyMs: 0,
  };
  state.headGate.open();
  state.streamGate.open();
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    // Only generation is scripted; the gateway's /metrics scrape gets a 404.
    if (req.method !== 'POST') req.on('end', () => res.writeHead(404).end());
    else req.on('end', () => void respond(req.url ?? '/', raw, res, req.headers.authorization));
    res.on('close', () => {
      if (!res.writableFinished) state.aborted.count++;
    });
  });
  const respond = async (
    path: string,
    raw: string,
    res: http.ServerResponse,
    authorization: string | undefined,
  ) => {
    const body = JSON.parse(raw) as Record<string, unknown>;
    state.received.push({ path, body, ...(authorization === undefined ? {} : { authorization }) });
    await state.headGate.wait();
    await sleep(state.latencyMs);
    if (res.destroyed) return;
    if (state.mode === 'fail') {
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"secret upstream detail"}');
      return;
    }
    const usage = {
      prompt_tokens: 16,
      completion_tokens: 2,
      total_tokens: 18,
      prompt_tokens_details: { cached_tokens: state.cachedTokens },
    };
    const meta = {
      prompt_tokens: 16,
      completion_tokens: 2,
      cached_tokens: state.cachedTokens,
      finish_reason: { type: 'stop' },
    };
    if (body['stream'] === true) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const first = `data: ${JSON.stringify({ choices: [{ delta: { content: 'a' } }] })}\n\n`;
      await new Promise((r) => res.write(first, r)); // on the wire before anything else happens
      if (state.mode === 'break') {
        res.destroy();
        return;
      }
      await state.streamGate.wait();
      await sleep(state.latencyMs);
      if (res.destroyed) return;
      res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'b' } }], usage })}\n\n`);
      res.end('data: [DONE]\n\n');
      return;
    }
    const answer =
      path === '/generate'
        ? { text: 'ab', output_ids: [1, 2], meta_info: meta }
        : {
            id: 'c1',
            object: 'chat.completion',
            choices: [{ index: 0, message: { role: 'assistant', content: 'ab' }, finish_reason: 'stop' }],
            usage,
          };
    const text = JSON.stringify(answer);
    if (state.mode === 'break') {
      // Headers and half the body on the wire, then the connection dies.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(text.length) });
      await new Promise((r) => res.write(text.slice(0, text.length >> 1), r));
      res.destroy();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(text);
  };
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
}

/** Yields to the event loop until `cond` holds (I/O callbacks run in between); no timers. */
function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve();
}

export async function eventually(cond: () => boolean, turns = 100_000): Promise<void> {
  for (let i = 0; i < turns; i++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error('condition not reached');
}
