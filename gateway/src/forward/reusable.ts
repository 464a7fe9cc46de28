// A request whose answer is deterministic (reuse/): served from a stored or
// in-flight identical request where there is one, else forwarded once and its
// answer stored when it may be (served.ts isStorable).

import type { GatewayMetrics } from '../metrics.ts';
import { computeReuseKey, type ResultReuser, type StoredResult } from '../reuse/index.ts';
import { buildReusedServed, isStorable, toServed, toStored, type Buffered, type Served } from './served.ts';
import type { Forwarding } from './types.ts';

export async function serveReusable(
  reuser: ResultReuser,
  metrics: GatewayMetrics,
  fwd: Forwarding,
  forward: () => Promise<Buffered>,
): Promise<Served> {
  const { ctx, route, body } = fwd;
  const key = computeReuseKey({
    fingerprint: route.fingerprint,
    salt: fwd.input.salt,
    route: ctx.path,
    body,
  });
  const span = ctx.trace?.startReuse();
  const out = await reuser.run(key, route.reuse.ttlSeconds * 1000, async () => {
    const r = await forward();
    return { value: r, stored: isStorable(r, route) ? toStored(r) : undefined };
  });
  span?.end(out.source);
  metrics.reuse.inc({ model: route.model, source: out.source });
  if (out.produced) return toServed(out.produced);
  return buildReusedServed(out.stored as StoredResult, out.source);
}
