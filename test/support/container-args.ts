// What a kubelet does to a container's env and args before it starts the process, for the test
// node agents (container-process.ts, sim-kubelet.ts): `$(VAR)` expansion and the downward API's
// pod fields.

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
