// Prefill/decode: the picker chose the prefill (it holds the prefix cache) and
// the least-loaded decode of the same fingerprint; both get the request with
// one bootstrap room; the client gets the decode's answer. No
// retry: a pair that failed may already have moved KV. The prefill's answer
// is read only for its cache report, and a failed prefill aborts the decode;
// a prefill that refused the request (a 4xx) gives the client that refusal.

import type { Target } from '../picker/types.ts';
import type { Policy } from '../policies/index.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { RequestEncodingError, sendBuffered, type BufferedResponse } from '../upstream/answer.ts';
import { computeBufferedReport, isFailedAnswer } from '../upstream/relay.ts';
import { failAttempt, markIfGone, type ForwardDeps } from './attempts.ts';
import { withReport, type Answer, type Forwarded, type Forwarding, type Via } from './types.ts';

export async function forwardPair<T, R extends Answer>(
  deps: ForwardDeps,
  fwd: Forwarding,
  { prefill, decode }: Extract<Target, { kind: 'pair' }>,
  { exchange, deliver }: Via<T, R>,
): Promise<Forwarded<T>> {
  const { ctx, decision, lease } = fwd;
  const { input, body } = decision;
  const { policy } = lease;
  const { book } = deps;
  const pairAbort = new AbortController();
  const signal = AbortSignal.any([ctx.signal, pairAbort.signal]);
  const decodeGuard = book.track(decode.id);
  deps.kvIndex.expectEvents(prefill.id);
  book.observe(policy, { kind: 'routed', endpoint: prefill.id, input });
  let refusal: BufferedResponse | undefined;
  void runPrefill(deps, fwd, policy, prefill, body, signal, (refused) => {
    refusal = refused;
    pairAbort.abort();
  });
  const up = ctx.trace?.startUpstream({
    endpoint: decode.id,
    url: decode.url,
    path: ctx.path,
    attempt: 0,
    role: 'decode',
  });
  const start = deps.clock.now();
  const res = await exchange
    .send(up ? up.inject(deps.send) : deps.send, decode.url, ctx.path, body, signal)
    .catch((err: unknown) => ({ error: err }));
  up?.settle(res);
  if ('error' in res || isFailedAnswer(res.statusCode)) {
    up?.end();
    decodeGuard.release();
    pairAbort.abort();
    // The decode was stopped because the prefill refused the request: the refusal is the answer,
    // and the decode is not to blame (it was not gone, it was aborted).
    if (refusal && !ctx.signal.aborted) {
      if (!('error' in res)) await exchange.discard(res);
      const result = await deliver(prefill, exchange.replay(refusal), () => undefined);
      // A refusal is no pressure: an answer, like a 4xx the decode gives itself.
      return { result, release: { ok: true } };
    }
    const error = await failAttempt(deps, fwd, decode, exchange, res);
    // A request at fault (4xx) or a client gone is no pressure on the runtimes.
    return { error, release: error.statusCode < 500 ? undefined : { ok: false } };
  }
  const release = { ok: true, latencyMs: deps.clock.now() - start };
  const result = await deliver(decode, res, (outcome) => {
    if (outcome.kind === 'first-byte' || outcome.kind === 'decoding') return;
    decodeGuard.release();
    up?.end(outcome.kind === 'failed' ? 'the answer broke before its end' : undefined);
  });
  return { result, release };
}

async function runPrefill(
  deps: ForwardDeps,
  fwd: Forwarding,
  policy: Policy,
  prefill: RouteEndpoint,
  body: Record<string, unknown>,
  signal: AbortSignal,
  /** With the prefill's answer when it refused the request (a 4xx). */
  onFailure: (refused?: BufferedResponse) => void,
): Promise<void> {
  const guard = deps.book.track(prefill.id);
  const up = fwd.ctx.trace?.startUpstream({
    endpoint: prefill.id,
    url: prefill.url,
    path: fwd.ctx.path,
    attempt: 0,
    role: 'prefill',
  });
  const res = await sendBuffered(
    up ? up.inject(deps.send) : deps.send,
    prefill.url,
    fwd.ctx.path,
    body,
    signal,
  ).catch((err: unknown) => ({ error: err }));
  guard.release();
  up?.settle(res);
  up?.end();
  if ('error' in res || res.statusCode >= 300) {
    const failure = 'error' in res ? res.error : res;
    // Not sent at all (the decode's attempt answers the client): no failure of the prefill.
    if (!signal.aborted && !(failure instanceof RequestEncodingError)) {
      deps.book.countFailure(prefill, failure);
      markIfGone(deps, prefill, failure);
    }
    deps.book.observe(policy, { kind: 'failed', endpoint: prefill.id, input: fwd.decision.input });
    const refused = !('error' in res) && res.statusCode >= 400 && !isFailedAnswer(res.statusCode);
    onFailure(refused ? res : undefined);
    return;
  }
  // A prefill server answers once its prefill is over (and the KV handed on): its answer is the
  // prefill's first byte, so the endpoint learns its prefill rate from it as a standalone one does
  // from a streamed answer, and the predicted backlog of a prefill part is known.
  deps.book.observe(policy, { kind: 'first-token', endpoint: prefill.id, input: fwd.decision.input });
  deps.book.observe(policy, {
    kind: 'completed',
    endpoint: prefill.id,
    input: fwd.decision.input,
    ...withReport(computeBufferedReport(res)),
  });
}
