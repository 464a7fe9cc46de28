// The I/O of one warm-up: each document as a chat completion (warmup.ts says
// why), in order, to a standalone endpoint as is, or to a prefill endpoint and
// its decode partner at once with the prefill's bootstrap address and a fresh
// room per document, as SGLang's prefill/decode clients send it.
import { computeBootstrapRoom, toRandom32 } from '#sglang/bootstrap.ts';
import type { ClientOptions } from '../../sglang-client/client.ts';
import { postChatCompletion } from '../../sglang-client/generate.ts';
import { buildWarmupRequest, type WarmupTarget } from './warmup.ts';

export interface WarmupSendOptions {
  /** Bound of one document's request. */
  timeoutMs: number;
  signal: AbortSignal;
  /** The runtime's API key for the target's fingerprint. */
  apiKey: string | undefined;
  random?: () => number;
}

/** Resolves to the first error, or undefined when every document was prefilled. */
export async function sendWarmupDocuments(
  target: WarmupTarget,
  documents: readonly string[],
  opts: WarmupSendOptions,
): Promise<string | undefined> {
  const post: ClientOptions = { timeoutMs: opts.timeoutMs, signal: opts.signal, apiKey: opts.apiKey };
  const random = toRandom32(opts.random ?? Math.random);
  for (const document of documents) {
    if (opts.signal.aborted) return 'cancelled';
    const pair = target.pair;
    if (!pair) {
      const r = await postChatCompletion(
        target.url,
        { ...buildWarmupRequest(target, document, undefined) },
        post,
      );
      if (!r.ok) return r.error;
      continue;
    }
    const body = { ...buildWarmupRequest(target, document, computeBootstrapRoom(random)) };
    const [prefill, decode] = await Promise.all([
      postChatCompletion(target.url, body, post),
      postChatCompletion(pair.decodeUrl, body, post),
    ]);
    if (!prefill.ok) return prefill.error;
    if (!decode.ok) return `decode ${pair.decodePod}: ${decode.error}`;
  }
  return undefined;
}
