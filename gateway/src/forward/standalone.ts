// Standalone endpoints: the request goes to the endpoint the picker chose; a
// failure before the answer starts is tried once more on the one the picker
// chooses next (lease.repick, up to maxAttempts), an answer that had begun is
// not (the runtime already did the work).

import { GatewayError } from '../errors/index.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { AnswerInterruptedError } from '../upstream/answer.ts';
import { isFailedAnswer } from '../upstream/relay.ts';
import { failAttempt, type ForwardDeps } from './attempts.ts';
import { withReport, type Answer, type Forwarded, type Forwarding, type Via } from './types.ts';

const ANSWER_BROKE = 'the answer broke before its end';

export async function forwardStandalone<T, R extends Answer>(
  deps: ForwardDeps,
  fwd: Forwarding,
  first: RouteEndpoint,
  { exchange, deliver }: Via<T, R>,
): Promise<Forwarded<T>> {
  const { ctx, decision, lease } = fwd;
  const { route, input } = decision;
  const { policy } = lease;
  const { book } = deps;
  const tried: string[] = [];
  let lastError: GatewayError | undefined;
  for (let attempt = 0; attempt < deps.maxAttempts; attempt++) {
    const retry = attempt === 0 ? { endpoint: first, body: decision.body } : lease.repick(tried, attempt);
    if (!retry) break;
    const { endpoint, body } = retry;
    if (attempt > 0) deps.metrics.retries.inc({ model: route.model });
    tried.push(endpoint.id);
    deps.kvIndex.expectEvents(endpoint.id);
    const guard = book.track(endpoint.id);
    book.observe(policy, { kind: 'routed', endpoint: endpoint.id, input });
    const up = ctx.trace?.startUpstream({
      endpoint: endpoint.id,
      url: endpoint.url,
      path: ctx.path,
      attempt,
      role: 'standalone',
    });
    const start = deps.clock.now();
    const res = await exchange
      .send(up ? up.inject(deps.send) : deps.send, endpoint.url, ctx.path, body, ctx.signal)
      .catch((err: unknown) => ({ error: err }));
    up?.settle(res);
    if ('error' in res || isFailedAnswer(res.statusCode)) {
      up?.end();
      guard.release();
      book.observe(policy, { kind: 'failed', endpoint: endpoint.id, input });
      const error = await failAttempt(deps, fwd, endpoint, exchange, res);
      if (error.code === 'GW_CLIENT_CLOSED') return { error, release: undefined };
      // The request itself is at fault: another endpoint would refuse it the same way.
      if (error.statusCode < 500) return { error, release: undefined };
      if ('error' in res && res.error instanceof AnswerInterruptedError)
        return { error, release: { ok: false } };
      lastError = error;
      continue;
    }
    const release = { ok: true, latencyMs: deps.clock.now() - start };
    const result = await deliver(endpoint, res, (outcome) => {
      if (outcome.kind === 'first-byte') {
        book.observe(policy, { kind: 'first-token', endpoint: endpoint.id, input });
        return;
      }
      if (outcome.kind === 'decoding') {
        book.observe(policy, { kind: 'decoding', endpoint: endpoint.id, input, tokens: outcome.tokens });
        return;
      }
      guard.release();
      up?.end(outcome.kind === 'failed' ? ANSWER_BROKE : undefined);
      book.observe(
        policy,
        outcome.kind === 'failed'
          ? { kind: 'failed', endpoint: endpoint.id, input }
          : { kind: 'completed', endpoint: endpoint.id, input, ...withReport(outcome.report) },
      );
    });
    return { result, release };
  }
  if (lastError) return { error: lastError, release: { ok: false } };
  return { error: new GatewayError('GW_NO_ENDPOINT', { model: route.model }), release: undefined };
}
