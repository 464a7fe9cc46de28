// How an answer comes back from a runtime endpoint: whole (non-streaming
// requests, read into one string), or streamed (SSE passed through). The
// forwarding code is the same for both; only sending and dropping differ.

import {
  sendBuffered,
  sendStreamed,
  type BufferedResponse,
  type SendOptions,
  type StreamedResponse,
} from './answer.ts';

export interface Exchange<R extends { readonly statusCode: number }> {
  send(
    opts: SendOptions,
    baseUrl: string,
    path: string,
    body: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<R>;
  /** Drops an answer that is not passed on (a 5xx before a retry). */
  discard(res: R): Promise<void>;
  /** A whole answer read elsewhere (a prefill's refusal), in this exchange's shape, to pass on. */
  replay(res: BufferedResponse): R;
}

export const BUFFERED_EXCHANGE: Exchange<BufferedResponse> = {
  send: sendBuffered,
  discard: () => Promise.resolve(),
  replay: (res) => res,
};

export const STREAMING_EXCHANGE: Exchange<StreamedResponse> = {
  send: sendStreamed,
  discard: (res) => res.discard(),
  replay: (res) => {
    let body: Buffer | null = Buffer.from(res.text);
    return {
      statusCode: res.statusCode,
      headers: res.headers,
      read: () => {
        const chunk = body;
        body = null;
        return Promise.resolve(chunk);
      },
      cancel: () => undefined,
      discard: () => Promise.resolve(),
    };
  },
};
