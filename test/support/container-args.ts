// What a kubelet does to a container's env and args before it starts the process, for the test
// node agents (sim-kubelet.ts, fetch-runner.ts): `$(VAR)` expansion and the downward API's
// pod fields.
import type { V1Container } from '@kubernetes/client-node';

/** What of a pod the downward API reads here. */
export interface PodFields {
  readonly metadata?:
    { readonly name?: string | undefined; readonly namespace?: string | undefined } | undefined;
  readonly status?: { readonly podIP?: string | undefined } | undefined;
}

/**
 * Kubernetes' expansion of `$(VAR)` in args: a variable of the container's env is replaced,
 * `$$` is a literal `$`, anything else stays as written.
 */
export function expandArgs(args: readonly string[], env: ReadonlyMap<string, string>): string[] {
  return args.map((a) =>
    a.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name: string | undefined) =>
      m === '$$' ? '$' : (env.get(name ?? '') ?? m),
    ),
  );
}

/** A downward API field of the pod; undefined for one these agents do not serve. */
export function readPodField(pod: PodFields, fieldPath: string): string | undefined {
  switch (fieldPath) {
    case 'status.podIP':
      return pod.status?.podIP;
    case 'metadata.name':
      return pod.metadata?.name;
    case 'metadata.namespace':
      return pod.metadata?.namespace;
    default:
      return undefined;
  }
}

/**
 * The container's env of values and pod fields, in order (a value may name an earlier
 * variable); a Secret or ConfigMap reference throws: the caller resolves those itself.
 */
export function resolvePlainEnv(pod: PodFields, container: V1Container): Map<string, string> {
  const env = new Map<string, string>();
  for (const e of container.env ?? []) {
    const field = e.valueFrom?.fieldRef?.fieldPath;
    if (e.valueFrom && !field)
      throw new Error(`env ${e.name} of container ${container.name} is from a source this agent cannot read`);
    const value = field ? readPodField(pod, field) : expandArgs([e.value ?? ''], env)[0];
    if (value === undefined) throw new Error(`env ${e.name}: pod field ${field ?? ''} is not served here`);
    env.set(e.name, value);
  }
  return env;
}
