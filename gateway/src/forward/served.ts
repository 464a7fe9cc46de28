// What the gateway hands back to the route: a whole body, or "already
// streamed". Reused answers come marked from the picker (picker/reused.ts).

import type { CacheReport } from '../policies/index.ts';
import type { ModelRoute, RouteEndpoint } from '../routing/table.ts';
import type { ReusedAnswer } from '../picker/types.ts';
import type { StoredResult } from '../reuse/index.ts';
import { isAbortedAnswer } from '../upstream/report.ts';

export const ENDPOINT_HEADER = 'x-cacheroute-endpoint';

export type Served =
  | {
      readonly kind: 'buffered';
      readonly status: number;
      readonly contentType: string;
      readonly body: string;
      readonly headers: Readonly<Record<string, string>>;
      /** What the runtime said of its cache in this answer (not for reused answers). */
      readonly report?: CacheReport;
    }
  | { readonly kind: 'streamed' };

export interface Buffered {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
  readonly endpoint: RouteEndpoint;
  readonly report: CacheReport | undefined;
}

export function toServed(b: Buffered): Served {
  return {
    kind: 'buffered',
    status: b.status,
    contentType: b.contentType,
    body: b.body,
    headers: { [ENDPOINT_HEADER]: b.endpoint.id },
    ...(b.report ? { report: b.report } : {}),
  };
}

export function toStored(b: Buffered): StoredResult {
  return { status: b.status, contentType: b.contentType, body: b.body };
}

/**
 * Only a complete 200 JSON answer from an endpoint of the current identity is
 * stored: an old-revision pod during a rollout must not answer for the new one.
 */
export function isStorable(b: Buffered, route: ModelRoute): boolean {
  if (b.status !== 200 || b.endpoint.fingerprint !== route.fingerprint) return false;
  try {
    return !isAbortedAnswer(JSON.parse(b.body));
  } catch {
    return false;
  }
}

/** A stored answer the picker returns as is. */
export function fromReused(answer: ReusedAnswer): Served {
  const { status, contentType, body, headers } = answer;
  return { kind: 'buffered', status, contentType, body, headers };
}
