// Counts API requests by verb and resource. Tests and the benchmark attach one to a
// client (client.observe(counter.observe)) to assert, for example, that a reconcile with
// nothing to change makes zero writes.
import { isWrite } from '#kube/client.ts';
import type { ApiVerb, RequestInfo } from '#kube/client.ts';

export interface RequestCounts {
  total: number;
  writes: number;
  byVerb: Partial<Record<ApiVerb, number>>;
  // `verb resource[/subresource]` → count, dry runs marked `(dry-run)`.
  byVerbResource: Record<string, number>;
}

export interface RequestCounter {
  readonly observe: (info: RequestInfo) => void;
  snapshot(): RequestCounts;
  reset(): void;
  // Requests seen so far that match, e.g. writesSince(mark) for a window of interest.
  requests(): readonly RequestInfo[];
}

export function createRequestCounter(): RequestCounter {
  let seen: RequestInfo[] = [];
  return {
    observe: (info) => {
      seen.push(info);
    },
    snapshot: () => countRequests(seen),
    reset: () => {
      seen = [];
    },
    requests: () => seen,
  };
}

export function countRequests(requests: readonly RequestInfo[]): RequestCounts {
  const out: RequestCounts = { total: 0, writes: 0, byVerb: {}, byVerbResource: {} };
  for (const r of requests) {
    out.total++;
    if (isWrite(r)) out.writes++;
    out.byVerb[r.verb] = (out.byVerb[r.verb] ?? 0) + 1;
    const label = `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''}${r.dryRun ? ' (dry-run)' : ''}`;
    out.byVerbResource[label] = (out.byVerbResource[label] ?? 0) + 1;
  }
  return out;
}
