// A Mooncake store's pod (the operator's HiCache mooncake L3, l3/mooncake.ts) run by the
// sim-kubelet as its real processes: each container whose command is one of Mooncake's programs
// (`mooncake_master`, `mooncake_client`) runs that program from the SGLang kit's venv
// (mooncake-transfer-engine-non-cuda, TCP transport) with the container's args, env expanded
// (`$(POD_IP)`), so the master binds the pod's IP as it would in its pod. The image is not looked
// at: what the operator renders is what runs. And the cluster DNS a pod's env relies on: a
// Service's name (`<svc>.<ns>.svc[:port]`) resolved to the IP of a Running pod it selects.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { KubeClient } from '#kube/client.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';
import { expandArgs } from './container-args.ts';
import { resolveContainerEnv } from './container-process.ts';
import { spawnManaged, stopManaged, type ManagedProcess } from './processes.ts';
import { ensureSglangKit } from './sglang-kit.ts';

const MOONCAKE_PROGRAMS = new Set(['mooncake_master', 'mooncake_client']);

export interface RunningStorePod {
  readonly pod: string;
  readonly ip: string;
  readonly processes: readonly ManagedProcess[];
  stop(): Promise<void>;
}

/** A pod all of whose containers run Mooncake programs. */
export function isMooncakePod(pod: PodObject): boolean {
  const containers = pod.spec?.containers ?? [];
  return (
    containers.length > 0 && containers.every((c) => MOONCAKE_PROGRAMS.has(basename(c.command?.[0] ?? '')))
  );
}

/** Starts the pod's containers, in order (the master first); undefined while an env var cannot resolve yet. */
export async function startMooncakePod(
  client: KubeClient,
  pod: PodObject,
  log: (msg: string) => void,
): Promise<RunningStorePod | undefined> {
  const bin = join(ensureSglangKit(), 'bin');
  const name = pod.metadata?.name ?? '';
  const envs = await Promise.all(
    (pod.spec?.containers ?? []).map((c) => resolveContainerEnv(client, pod, c, log)),
  );
  if (envs.some((e) => e === undefined)) return undefined;
  const dir = mkdtempSync(join(tmpdir(), `cacheroute-mooncake-${name}-`));
  const processes = (pod.spec?.containers ?? []).map((c, i) => {
    const env = envs[i] ?? new Map<string, string>();
    const program = basename(c.command?.[0] ?? '');
    return spawnManaged(
      `${name}/${c.name}`,
      join(bin, program),
      expandArgs([...(c.command ?? []).slice(1), ...(c.args ?? [])], env),
      {
        logPath: join(dir, `${c.name}.log`),
        env: { ...process.env, ...Object.fromEntries(env) },
      },
    );
  });
  log(
    `mooncake store pod ${name}: ${processes.map((p) => `${p.name} pid ${p.pid}`).join(', ')} (logs in ${dir})`,
  );
  return {
    pod: name,
    ip: pod.status?.podIP ?? '',
    processes,
    async stop() {
      // The store node before its master, as a pod's containers go in no order but a node unmounts.
      for (const p of [...processes].reverse()) await stopManaged(p, 5_000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const SERVICE_HOST =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?(:\d+)?$/;

/**
 * The env with each value that is a Service's DNS name (host or host:port) turned into the IP of a
 * Running pod the Service selects, as cluster DNS and the Service's proxy get a pod there;
 * undefined while such a Service has no such pod (a kubelet's container would retry its connect).
 */
export async function resolveServiceNames(
  client: KubeClient,
  env: ReadonlyMap<string, string>,
): Promise<Map<string, string> | undefined> {
  const out = new Map(env);
  for (const [k, v] of env) {
    const m = SERVICE_HOST.exec(v);
    if (!m) continue;
    const [svcName, ns, port] = [m[1] ?? '', m[3] ?? '', m[6] ?? ''];
    const svc = await client.get<KubeObject & { spec?: { selector?: Record<string, string> } }>(
      Resources.services,
      ns,
      svcName,
    );
    const selector = svc?.spec?.selector;
    if (!selector) return undefined;
    const pods = await client.list<PodObject>(Resources.pods, {
      namespace: ns,
      labelSelector: Object.entries(selector)
        .map(([a, b]) => `${a}=${b}`)
        .join(','),
    });
    const ip = pods.items.find((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp)?.status
      ?.podIP;
    if (!ip) return undefined;
    out.set(k, `${ip}${port}`);
  }
  return out;
}
