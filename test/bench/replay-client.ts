// One streaming request to an SGLang-compatible server (node:http), timing
// TTFT (first SSE chunk with output), the gaps between output chunks
// (inter-token latency: the runtimes stream a token a chunk) and end-to-end latency.

import http from 'node:http';
import https from 'node:https';

export interface StreamOutcome {
  readonly status: number;
  readonly error?: string;
  readonly worker: string | null;
  readonly ttftMs: number;
  /** Gaps between consecutive output chunks, ms. */
  readonly itlMs: readonly number[];
  readonly e2eMs: number;
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly completionTokens: number;
}

const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: Infinity }),
  https: new https.Agent({ keepAlive: true }),
};

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}
interface Chunk {
  error?: { message?: string };
  text?: string;
  meta_info?: {
    prompt_tokens?: number;
    cached_tokens?: number;
    completion_tokens?: number;
    finish_reason?: unknown;
  };
  choices?: { delta?: { content?: string }; text?: string }[];
  usage?: Usage | null;
}

/** POST `body` to `url` with stream: true and read the SSE answer to [DONE]. */
export function postStream(
  url: URL,
  body: unknown,
  now: () => number = () => performance.now(),
): Promise<StreamOutcome> {
  const start = now();
  const payload = JSON.stringify(body);
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve) => {
    let ttft = -1;
    let lastOutput = -1;
    const itl: number[] = [];
    let prompt = 0;
    let cached = 0;
    let completion = 0;
    let error: string | undefined;
    const fail = (status: number, message: string, worker: string | null): void =>
      resolve({
        status,
        error: message,
        worker,
        ttftMs: -1,
        itlMs: [],
        e2eMs: now() - start,
        promptTokens: 0,
        cachedTokens: 0,
        completionTokens: 0,
      });
    const req = mod.request(
      url,
      {
        method: 'POST',
        agent: url.protocol === 'https:' ? agents.https : agents.http,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          accept: 'text/event-stream',
        },
      },
      (res) => {
        const worker = (res.headers['x-sim-worker'] as string | undefined) ?? null;
        res.setEncoding('utf8');
        if ((res.statusCode ?? 0) !== 200) {
          let text = '';
          res.on('data', (c: string) => (text += c));
          res.on('end', () => fail(res.statusCode ?? 0, text.slice(0, 300), worker));
          return;
        }
        let buf = '';
        const onEvent = (data: string): void => {
          if (data === '[DONE]') return;
          let c: Chunk;
          try {
            c = JSON.parse(data) as Chunk;
          } catch {
            return;
          }
          if (c.error) error = c.error.message ?? 'stream error';
          const hasOutput =
            (c.text !== undefined && c.text !== '') ||
            (c.choices ?? []).some((x) => (x.delta?.content ?? x.text ?? '') !== '');
          if (hasOutput) {
            const t = now();
            if (ttft < 0) ttft = t - start;
            else itl.push(t - lastOutput);
            lastOutput = t;
          }
          if (c.meta_info) {
            prompt = c.meta_info.prompt_tokens ?? prompt;
            cached = c.meta_info.cached_tokens ?? cached;
            completion = c.meta_info.completion_tokens ?? completion;
          }
          if (c.usage) {
            prompt = c.usage.prompt_tokens ?? prompt;
            completion = c.usage.completion_tokens ?? completion;
            cached = c.usage.prompt_tokens_details?.cached_tokens ?? cached;
          }
        };
        res.on('data', (chunk: string) => {
          buf += chunk;
          let i: number;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const event = buf.slice(0, i);
            buf = buf.slice(i + 2);
            for (const line of event.split('\n')) if (line.startsWith('data: ')) onEvent(line.slice(6));
          }
        });
        res.on('end', () => {
          const e2e = now() - start;
          resolve({
            status: 200,
            ...(error === undefined ? {} : { error }),
            worker,
            ttftMs: ttft < 0 ? e2e : ttft,
            itlMs: itl,
            e2eMs: e2e,
            promptTokens: prompt,
            cachedTokens: cached,
            completionTokens: completion,
          });
        });
        res.on('error', (e) => fail(0, e.message, worker));
      },
    );
    req.on('error', (e) => fail(0, e.message, null));
    req.end(payload);
  });
}
