// Keeps a running Envoy on its InferencePool: watches (lib/kube informers, no polling) the pool,
// the pods of its namespace and the runtime key Secrets there, and on each change renders the
// pool's endpoints and keys again (pool-route.ts buildPoolView, bootstrap.ts
// renderPoolEndpointsFile) and, under FailOpen, renames the result over the file Envoy follows
// when it differs: a rollout's new pods and a new identity's key reach the running Envoy.
// FailClose has nothing to write (ORIGINAL_DST goes wherever the picker names). What no file
// can follow: a change of failureMode (another bootstrap: FailClose has no pool cluster at all)
// is reported, with the file left as it was. A view that cannot be rendered (a Ready pod whose
// key is not in the Secret yet) is reported and the last good file kept, until the next change.
import { RUNTIME_API_KEY_LABEL } from '#api';
import { KubeClient } from '#kube/client.ts';
import { loadClusterCredentials } from '#kube/cluster-credentials.ts';
import { noopLogger, type Logger } from '#kube/logger.ts';
import { Resources } from '#kube/resources.ts';
import { InformerGroup } from '../../gateway/src/discovery/informer-group.ts';
import { renderPoolEndpointsFile } from './bootstrap.ts';
import { replacePoolEndpointsFile } from './pool-endpoints-file.ts';
import { buildPoolView, type PoolFailureMode, type PoolView } from './pool-route.ts';

/** What one round of following did with the file (tests and the log read it). */
export type FollowOutcome =
  | { readonly kind: 'written'; readonly view: PoolView }
  | { readonly kind: 'unchanged' }
  | { readonly kind: 'not-followed'; readonly reason: string };

export interface FollowPoolOptions {
  readonly kubeconfig: string;
  readonly namespace: string;
  readonly name: string;
  /** The failure mode Envoy's bootstrap was rendered for. */
  readonly failureMode: PoolFailureMode;
  /** FailOpen (required there): the pool endpoints file Envoy follows (RunningEnvoy.poolEndpointsFile). */
  readonly file?: string | undefined;
  readonly onOutcome?: (outcome: FollowOutcome) => void;
  readonly logger?: Logger;
  /** Delay from a change to the render that includes it (default 100 ms, InformerGroup's). */
  readonly coalesceMs?: number;
}

export interface PoolFollower {
  stop(): Promise<void>;
}

/**
 * One round, pure but for the write: the objects as the informers hold them now → the file's
 * new text, if it changed. `last` is the text Envoy has now.
 */
export function decidePoolFile(
  objects: {
    readonly pools: readonly unknown[];
    readonly pods: readonly unknown[];
    readonly secrets: readonly unknown[];
  },
  expected: { readonly namespace: string; readonly name: string; readonly failureMode: PoolFailureMode },
  last: string | undefined,
): { outcome: FollowOutcome; text?: string } {
  const pool = objects.pools[0];
  const where = `InferencePool ${expected.namespace}/${expected.name}`;
  if (pool === undefined) return { outcome: { kind: 'not-followed', reason: `${where} is gone` } };
  let view: PoolView;
  let text: string;
  try {
    view = buildPoolView({ pool, pods: objects.pods, secrets: objects.secrets });
    if (view.failureMode !== expected.failureMode)
      return {
        outcome: {
          kind: 'not-followed',
          reason: `${where} is now ${view.failureMode}, Envoy's bootstrap ${expected.failureMode}: restart to follow it`,
        },
      };
    // FailClose: Envoy's ORIGINAL_DST cluster holds no endpoints; nothing to write.
    if (view.failureMode === 'FailClose') return { outcome: { kind: 'unchanged' } };
    text = renderPoolEndpointsFile(view.endpoints, view.runtimeKeys);
  } catch (err) {
    return { outcome: { kind: 'not-followed', reason: err instanceof Error ? err.message : String(err) } };
  }
  return text === last ? { outcome: { kind: 'unchanged' } } : { outcome: { kind: 'written', view }, text };
}

/** Starts following; the first round runs once every informer has listed. */
export async function followInferencePool(opts: FollowPoolOptions): Promise<PoolFollower> {
  const file = opts.file;
  if ((opts.failureMode === 'FailOpen') !== (file !== undefined))
    throw new Error(
      `a FailOpen pool's Envoy follows a pool endpoints file, a FailClose one none (${opts.name}: ${opts.failureMode})`,
    );
  const client = await KubeClient.fromKubeConfig(await loadClusterCredentials(opts.kubeconfig), {
    userAgent: 'cacheroute-envoy-follower',
  });
  const log = opts.logger ?? noopLogger;
  let last: string | undefined;
  const group = new InformerGroup({
    client,
    namespaces: [opts.namespace],
    kinds: [
      {
        resource: Resources.inferencePools,
        fieldSelector: `metadata.name=${opts.name}`,
      },
      { resource: Resources.pods },
      { resource: Resources.secrets, labelSelector: `${RUNTIME_API_KEY_LABEL}=true` },
    ],
    logger: log,
    ...(opts.coalesceMs !== undefined ? { coalesceMs: opts.coalesceMs } : {}),
    rebuild: ([pools = [], pods = [], secrets = []]) => {
      const { outcome, text } = decidePoolFile({ pools, pods, secrets }, opts, last);
      if (text !== undefined && file !== undefined) {
        replacePoolEndpointsFile(file, text);
        last = text;
      }
      if (outcome.kind === 'not-followed')
        log.warn('Envoy keeps its pool endpoints', { reason: outcome.reason });
      if (outcome.kind === 'written')
        log.info("Envoy's pool endpoints rewritten", { endpoints: outcome.view.endpoints.length });
      opts.onOutcome?.(outcome);
    },
  });
  group.start();
  return {
    async stop() {
      await group.stop();
      await client.close();
    },
  };
}
