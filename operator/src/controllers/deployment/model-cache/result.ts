// What a fetch pod left: the fetcher's result line in its termination message (--result-file
// /dev/termination-log), or, for a fetcher that died before writing it, the tail of its log
// (FallbackToLogsOnError), whose last result line is the one that counts.
import type { V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';
import type { KubeObject } from '#kube/objects.ts';
import { FETCH_CONTAINER } from './names.ts';

export const FetchResult = z.discriminatedUnion('phase', [
  z.object({
    phase: z.literal('done'),
    ok: z.literal(true),
    digest: z.string(),
    tokenizerDigest: z.string(),
    files: z.number().int().nonnegative(),
    bytes: z.number().int().nonnegative(),
    downloadedBytes: z.number().int().nonnegative().optional(),
    fromMarker: z.boolean().optional(),
  }),
  z.object({
    phase: z.literal('failed'),
    ok: z.literal(false),
    reason: z.string(),
    message: z.string(),
    path: z.string().optional(),
  }),
]);
export type FetchResult = z.infer<typeof FetchResult>;

/** The last result line of a termination message; undefined when it holds none. */
export function parseFetchResult(message: string | undefined): FetchResult | undefined {
  const lines = (message ?? '').split('\n').reverse();
  for (const l of lines) {
    if (!l.trim().startsWith('{')) continue;
    try {
      const parsed = FetchResult.safeParse(JSON.parse(l));
      if (parsed.success) return parsed.data;
    } catch {
      // A log line cut by the 4 KiB limit: not a result.
    }
  }
  return undefined;
}

export interface FetchAttempt {
  readonly pod: string;
  readonly createdAt: string;
  readonly phase: string;
  readonly exitCode: number | undefined;
  readonly result: FetchResult | undefined;
}

/** Each fetch pod as an attempt, oldest first. */
export function computeFetchAttempts(pods: readonly (KubeObject & Pick<V1Pod, 'status'>)[]): FetchAttempt[] {
  return pods
    .map((p) => {
      const terminated = p.status?.containerStatuses?.find((c) => c.name === FETCH_CONTAINER)?.state
        ?.terminated;
      return {
        pod: p.metadata?.name ?? '',
        createdAt: String(p.metadata?.creationTimestamp ?? ''),
        phase: p.status?.phase ?? 'Pending',
        exitCode: terminated?.exitCode,
        result: parseFetchResult(terminated?.message),
      };
    })
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.pod.localeCompare(b.pod));
}

export interface NodeCheck {
  readonly pod: string;
  readonly node: string;
  /** The init container's latest run: its result, or undefined while it runs or before it ran. */
  readonly result: FetchResult | undefined;
}

/**
 * Each pod's node check: the fetcher init container's latest run (the current state once it
 * ended, else the last one a restart left), as the kubelet reports it.
 */
export function computeNodeChecks(
  pods: readonly (KubeObject & Pick<V1Pod, 'spec' | 'status'>)[],
): NodeCheck[] {
  return pods
    .filter((p) => !p.metadata?.deletionTimestamp)
    .map((p) => {
      const status = p.status?.initContainerStatuses?.find((c) => c.name === FETCH_CONTAINER);
      const terminated = status?.state?.terminated ?? status?.lastState?.terminated;
      return {
        pod: p.metadata?.name ?? '',
        node: p.spec?.nodeName ?? '',
        result: parseFetchResult(terminated?.message),
      };
    })
    .sort((a, b) => a.pod.localeCompare(b.pod));
}
