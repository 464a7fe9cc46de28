// Which Deployment of a weighted split serves a request (ADR 0008). With a
// session key (the OpenAI `user` field, or the x-cacheroute-session header)
// the choice is a hash of the key, so a client's requests stay on one
// identity and moving a weight moves only the keys in the range it gives up;
// without one it is random in proportion to the weights, so the split holds
// even when every request shares one long system prompt (a prefix hash would
// send them all one way). Pure but for `random`.

import { hashToUnit } from '#kube/seeded-random.ts';
import type { ModelRoute } from './table.ts';

export function chooseWeighted(
  candidates: readonly ModelRoute[],
  sessionKey: string | undefined,
  random: () => number = Math.random,
): ModelRoute | undefined {
  if (candidates.length <= 1) return candidates[0];
  const total = candidates.reduce((n, c) => n + (c.weight ?? 0), 0);
  // All weights 0: nobody asked for traffic; the first (the oldest) serves rather than nobody.
  if (total <= 0) return candidates[0];
  let point = (sessionKey === undefined ? random() : hashToUnit(sessionKey)) * total;
  for (const c of candidates) {
    point -= c.weight ?? 0;
    if (point < 0) return c;
  }
  return candidates.at(-1);
}
