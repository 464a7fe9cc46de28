// A stored answer returned as is: marked reused in its body (zero usage) and
// in a header naming where it came from (the store, or an identical request
// in flight).

import { markReused, type Json, type StoredResult } from '../reuse/index.ts';
import type { ReusedAnswer } from './types.ts';

export const REUSED_HEADER = 'x-cacheroute-reused';

export function buildReusedAnswer(stored: StoredResult, source: ReusedAnswer['source']): ReusedAnswer {
  let text = stored.body;
  try {
    text = JSON.stringify(markReused(JSON.parse(stored.body) as Json));
  } catch {
    // stored bodies are JSON (forward/served.ts isStorable); keep the text if not
  }
  return {
    source,
    status: stored.status,
    contentType: stored.contentType,
    body: text,
    headers: { [REUSED_HEADER]: source },
  };
}
