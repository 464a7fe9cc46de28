import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  AnswerInterruptedError,
  AnswerTooLargeError,
  sendBuffered,
  sendStreamed,
  type SendOptions,
} from './answer.ts';

const CHUNK = 64 * 1024;
const CHUNKS = 200; // 12.5 MiB: more than loopback socket buffers hold

let server: http.Server;
let base: string;
let flushed: number;
let mode: 'flood' | 'break';
let opts: SendOptions;

beforeEach(async () => {
  flushed = 0;
  mode = 'flood';
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (mode === 'break') {
        res.write('data: one\n\n', () => res.destroy());
        return;
      }
      const payload = Buffer.alloc(CHUNK, 0x61);
      let sent = 0;
      const pump = (): void => {
        while (sent < CHUNKS) {
          sent++;
          const ok = res.write(payload, () => (flushed += CHUNK));
          if (!ok) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  opts = { agent: new Agent(), headersTimeoutMs: 10_000, bodyTimeoutMs: 10_000 };
});

afterEach(async () => {
  await opts.agent.close();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

/** Waits until `read` stops changing between turns (the writer is stuck or done). */
async function settled(read: () => number): Promise<number> {
  let last = -1;
  let stable = 0;
  while (stable < 5) {
    await new Promise((r) => setTimeout(r, 40));
    const now = read();
    stable = now === last ? stable + 1 : 0;
    last = now;
  }
  return last;
}

describe('sendStreamed', () => {
  it('pauses the upstream while chunks go unread, and delivers every byte once read', async () => {
    const res = await sendStreamed(opts, base, '/v1/chat/completions', {}, new AbortController().signal);
    expect(res.statusCode).toBe(200);
    // Nothing read yet: the writer must stall well short of the whole answer.
    expect(await settled(() => flushed)).toBeLessThan(CHUNK * CHUNKS);
    let received = 0;
    for (let c = await res.read(); c !== null; c = await res.read()) received += c.length;
    expect(received).toBe(CHUNK * CHUNKS);
    expect(await res.read()).toBeNull();
  });

  it('an answer that breaks after it started rejects the next read as interrupted', async () => {
    mode = 'break';
    const res = await sendStreamed(opts, base, '/v1/chat/completions', {}, new AbortController().signal);
    const first = await res.read();
    expect(first?.toString()).toBe('data: one\n\n');
    await expect(res.read()).rejects.toBeInstanceOf(AnswerInterruptedError);
  });

  it('an abort signal stops a running answer', async () => {
    const abort = new AbortController();
    const res = await sendStreamed(opts, base, '/v1/chat/completions', {}, abort.signal);
    await res.read();
    abort.abort();
    await expect(
      (async () => {
        while ((await res.read()) !== null);
      })(),
    ).rejects.toBeInstanceOf(AnswerInterruptedError);
  });

  it('refuses at once when the signal is already aborted', async () => {
    const abort = new AbortController();
    abort.abort();
    await expect(sendStreamed(opts, base, '/', {}, abort.signal)).rejects.toThrow();
  });
});

describe('sendBuffered', () => {
  it('reads the whole answer into one string', async () => {
    const res = await sendBuffered(opts, base, '/v1/chat/completions', {}, new AbortController().signal);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.text).toHaveLength(CHUNK * CHUNKS);
  });

  it('an answer that breaks after it started is interrupted, not a connection failure', async () => {
    mode = 'break';
    await expect(
      sendBuffered(opts, base, '/v1/chat/completions', {}, new AbortController().signal),
    ).rejects.toBeInstanceOf(AnswerInterruptedError);
  });

  it('an answer past maxAnswerBytes is cut, and says so', async () => {
    const capped = { ...opts, maxAnswerBytes: 1024 * 1024 };
    const err = await sendBuffered(
      capped,
      base,
      '/v1/chat/completions',
      {},
      new AbortController().signal,
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AnswerInterruptedError);
    expect((err as Error).cause).toBeInstanceOf(AnswerTooLargeError);
  });
});
