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
}

export const BUFFERED_EXCHANGE: Exchange<BufferedResponse> = {
  send: sendBuffered,
  discard: () => Promise.resolve(),
};

export const STREAMING_EXCHANGE: Exchange<StreamedResponse> = {
  send: sendStreamed,
  discard: (res) => res.discard(),
};
