// A container run as a local process, the way a kubelet would run it, for the test node agents
// (fetch-runner.ts runs the fetch Job's pods, sim-kubelet.ts a pod's init containers): each
// volume mapped to a local directory (a PersistentVolumeClaim to its bound PersistentVolume's
// hostPath, a hostPath to the pod's node's own tree under a node root, a Secret to a directory of
// its items with mode 0400, an emptyDir to a fresh directory), the container's paths in its
// command and args rewritten to those directories, its env resolved (values, the downward API's
// pod fields, Secret keys) and `$(VAR)` expanded, and its exit read back as a kubelet reports it:
// the exit code and the termination message (the terminationMessagePath's file, or with
// FallbackToLogsOnError and a failure, the log's last 2 KiB).
// The image's `node <file>` runs the repository's own file under this Node (the image's working
// directory is the repository's layout); `node -e <script>` runs the script.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Container, V1EnvVar, V1Pod, V1Volume } from '@kubernetes/client-node';
import type { KubeClient } from '#kube/client.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { expandArgs, readPodField } from './container-args.ts';
import { spawnManaged, stopManaged, type ManagedProcess } from './processes.ts';
import { REPO_ROOT } from './samples.ts';

export type ContainerPod = KubeObject & Pick<V1Pod, 'spec' | 'status'>;
type PvcObject = KubeObject & { spec?: { volumeName?: string } };
type PvObject = KubeObject & { spec?: { hostPath?: { path: string }; local?: { path: string } } };
type SecretObject = KubeObject & { data?: Record<string, string> };

// A kubelet reads at most this much of the log for FallbackToLogsOnError (and 4096 bytes of a file).
const LOG_TAIL_BYTES = 2048;
const MESSAGE_BYTES = 4096;

const PERSISTENT_VOLUMES = {
  group: '',
  version: 'v1',
  resource: 'persistentvolumes',
  kind: 'PersistentVolume',
  namespaced: false,
} as const;

/** A claim's directory: its bound PersistentVolume's hostPath (or local path); undefined while unbound. */
async function resolveClaim(
  client: KubeClient,
  namespace: string,
  claimName: string,
): Promise<string | undefined> {
  const pvc = await client.get<PvcObject>(Resources.persistentVolumeClaims, namespace, claimName);
  const pvName = pvc?.spec?.volumeName;
  if (!pvName) return undefined;
  const pv = await client.get<PvObject>(PERSISTENT_VOLUMES, undefined, pvName);
  const path = pv?.spec?.hostPath?.path ?? pv?.spec?.local?.path;
  if (!path) throw new Error(`PersistentVolume ${pvName} has no hostPath or local path this runner can map`);
  return path;
}

/**
 * The container's mounts of PersistentVolumeClaims as [mountPath, local directory] pairs, longest
 * first (a subPath made as a kubelet makes it); undefined while a claim is unbound. Other volumes
 * are left out: for a runner that maps only what is shared between pods (HiCache's L3 volume).
 */
export async function resolveClaimMounts(
  client: KubeClient,
  pod: ContainerPod,
  container: V1Container | undefined,
): Promise<[string, string][] | undefined> {
  const namespace = pod.metadata?.namespace ?? '';
  const map: [string, string][] = [];
  for (const m of container?.volumeMounts ?? []) {
    const claim = pod.spec?.volumes?.find((v) => v.name === m.name)?.persistentVolumeClaim?.claimName;
    if (claim === undefined) continue;
    const dir = await resolveClaim(client, namespace, claim);
    if (dir === undefined) return undefined;
    const local = m.subPath ? join(dir, m.subPath) : dir;
    mkdirSync(local, { recursive: true });
    map.push([m.mountPath, local]);
  }
  return map.sort((a, b) => b[0].length - a[0].length);
}

/** A Secret volume as a directory of its items, mode 0400; undefined while the Secret or a key is missing. */
async function resolveSecret(
  client: KubeClient,
  namespace: string,
  source: NonNullable<V1Volume['secret']>,
  dir: string,
): Promise<string | undefined> {
  const secret = await client.get<SecretObject>(Resources.secrets, namespace, source.secretName ?? '');
  if (!secret) return undefined;
  mkdirSync(dir, { recursive: true });
  const items = source.items ?? Object.keys(secret.data ?? {}).map((key) => ({ key, path: key }));
  for (const item of items) {
    const value = secret.data?.[item.key];
    if (value === undefined) return undefined;
    // Written afresh each time (a later container, a retry, a changed Secret): the old file is read-only.
    rmSync(join(dir, item.path), { force: true });
    writeFileSync(join(dir, item.path), Buffer.from(value, 'base64'), { mode: 0o400 });
  }
  return dir;
}

/** Where a node's hostPath lives here: each fake node has its own tree under the node root. */
export function buildHostPathDir(nodeRoot: string, nodeName: string, path: string): string {
  return join(nodeRoot, nodeName, path);
}

/**
 * A hostPath volume on the pod's node: made as a kubelet makes a DirectoryOrCreate (or untyped)
 * one; a Directory one must be there (undefined until it is, as a kubelet retries the mount).
 */
function resolveHostPath(
  pod: ContainerPod,
  source: NonNullable<V1Volume['hostPath']>,
  nodeRoot: string,
): string | undefined {
  const node = pod.spec?.nodeName;
  if (!node) throw new Error(`pod ${pod.metadata?.name ?? ''} has a hostPath volume but no node`);
  const dir = buildHostPathDir(nodeRoot, node, source.path);
  const type = source.type ?? '';
  if (type === '' || type === 'DirectoryOrCreate') mkdirSync(dir, { recursive: true });
  else if (type !== 'Directory')
    throw new Error(`hostPath type ${type} is not one this runner maps: use Directory or DirectoryOrCreate`);
  return existsSync(dir) ? dir : undefined;
}

/**
 * The pod's volumes as local directories; undefined while one cannot be resolved yet. `scratch` is
 * the pod's own directory (Secrets, emptyDirs); `nodeRoot` holds every node's hostPath trees.
 */
export async function resolveVolumes(
  client: KubeClient,
  pod: ContainerPod,
  scratch: string,
  nodeRoot?: string,
): Promise<Map<string, string> | undefined> {
  const namespace = pod.metadata?.namespace ?? '';
  const dirs = new Map<string, string>();
  for (const v of pod.spec?.volumes ?? []) {
    let dir: string | undefined;
    if (v.persistentVolumeClaim)
      dir = await resolveClaim(client, namespace, v.persistentVolumeClaim.claimName);
    else if (v.secret)
      dir = await resolveSecret(client, namespace, v.secret, join(scratch, `secret-${v.name}`));
    else if (v.emptyDir) {
      dir = join(scratch, `empty-${v.name}`);
      mkdirSync(dir, { recursive: true });
    } else if (v.hostPath && nodeRoot !== undefined) dir = resolveHostPath(pod, v.hostPath, nodeRoot);
    else
      throw new Error(
        `volume ${v.name} of pod ${pod.metadata?.name ?? ''} is of a kind this runner cannot map`,
      );
    if (dir === undefined) return undefined;
    dirs.set(v.name, dir);
  }
  return dirs;
}

/** The container's paths mapped to local ones, longest mount first. */
export function buildPathMap(
  container: V1Container,
  volumes: ReadonlyMap<string, string>,
  terminationFile: string,
): [string, string][] {
  const map: [string, string][] = (container.volumeMounts ?? []).flatMap((m): [string, string][] => {
    const dir = volumes.get(m.name);
    return dir === undefined ? [] : [[m.mountPath, m.subPath ? join(dir, m.subPath) : dir]];
  });
  map.push([container.terminationMessagePath ?? '/dev/termination-log', terminationFile]);
  return map.sort((a, b) => b[0].length - a[0].length);
}

export function mapContainerPath(arg: string, map: readonly [string, string][]): string {
  for (const [from, to] of map)
    if (arg === from || arg.startsWith(`${from}/`)) return to + arg.slice(from.length);
  return arg;
}

/** One env var that is not a Secret key: a value (expanded with the earlier ones) or a pod field. */
function resolvePlainVar(
  pod: ContainerPod,
  container: V1Container,
  e: V1EnvVar,
  env: ReadonlyMap<string, string>,
): string {
  const field = e.valueFrom?.fieldRef?.fieldPath;
  if (field) {
    const value = readPodField(pod, field);
    if (value === undefined) throw new Error(`env ${e.name}: pod field ${field} is not served here`);
    return value;
  }
  if (e.valueFrom)
    throw new Error(`env ${e.name} of container ${container.name} is from a source this agent cannot read`);
  return expandArgs([e.value ?? ''], env)[0] ?? '';
}

/**
 * The container's env as a kubelet resolves it, in order (a value may name an earlier variable):
 * values, the pod's fields, Secret keys; undefined while a Secret key it names is missing.
 */
export async function resolveContainerEnv(
  client: KubeClient,
  pod: ContainerPod,
  container: V1Container | undefined,
  log: (msg: string) => void,
): Promise<Map<string, string> | undefined> {
  const namespace = pod.metadata?.namespace ?? '';
  const env = new Map<string, string>();
  if (!container) return env;
  for (const e of container.env ?? []) {
    const ref = e.valueFrom?.secretKeyRef;
    if (!ref) {
      env.set(e.name, resolvePlainVar(pod, container, e, env));
      continue;
    }
    const secret = await client.get<SecretObject>(Resources.secrets, namespace, ref.name ?? '');
    const value = secret?.data?.[ref.key];
    if (value === undefined) {
      if (ref.optional) continue;
      log(`env ${e.name}: Secret ${namespace}/${ref.name} has no key ${ref.key} (yet)`);
      return undefined;
    }
    env.set(e.name, Buffer.from(value, 'base64').toString('utf8'));
  }
  return env;
}

/** How a container's process ended, as a kubelet reads it. */
export interface ContainerExit {
  readonly argv: readonly string[];
  readonly exitCode: number;
  /** stdout and stderr. */
  readonly output: string;
  /** The termination message: the file, or the log's tail (FallbackToLogsOnError, on a failure). */
  readonly message: string;
  readonly startedAt: string;
  readonly finishedAt: string;
}

export interface ContainerProcess {
  readonly argv: readonly string[];
  readonly proc: ManagedProcess;
  readonly exit: Promise<ContainerExit>;
  stop(): Promise<void>;
}

/** The image's command as a local one: `node` is this Node, its file the repository's own. */
function buildLocalCommand(command: string | undefined, args: readonly string[]): [string, string[]] {
  if (command !== 'node') return [command ?? '', [...args]];
  const [first, ...rest] = args;
  if (first === undefined || first.startsWith('-')) return [process.execPath, [...args]];
  return [process.execPath, [join(REPO_ROOT, first), ...rest]];
}

/**
 * Starts the container's command (with its args) as a process in `dir` (its log and termination
 * file), its mounts mapped to `volumes` and `env` set, from the repository's root.
 */
export function startContainerProcess(opts: {
  label: string;
  container: V1Container;
  volumes: ReadonlyMap<string, string>;
  env: ReadonlyMap<string, string>;
  dir: string;
}): ContainerProcess {
  const { container, dir } = opts;
  if (!container.command?.length) throw new Error(`container ${container.name} has no command to run`);
  mkdirSync(dir, { recursive: true });
  const terminationFile = join(dir, 'termination-log');
  writeFileSync(terminationFile, '');
  const map = buildPathMap(container, opts.volumes, terminationFile);
  const [command, ...rest] = expandArgs([...container.command, ...(container.args ?? [])], opts.env).map(
    (a) => mapContainerPath(a, map),
  );
  const [file, argv] = buildLocalCommand(command, rest);
  const logPath = join(dir, 'log');
  const startedAt = new Date().toISOString();
  const proc = spawnManaged(opts.label, file, argv, {
    logPath,
    cwd: REPO_ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: dir, ...Object.fromEntries(opts.env) },
  });
  const exit = proc.exited.then((e): ContainerExit => {
    const output = readFileSync(logPath, 'utf8');
    const exitCode = e.code ?? 137;
    const written = readFileSync(terminationFile, 'utf8').slice(0, MESSAGE_BYTES);
    const message =
      written !== '' || exitCode === 0 || container.terminationMessagePolicy !== 'FallbackToLogsOnError'
        ? written
        : Buffer.from(output).subarray(-LOG_TAIL_BYTES).toString('utf8');
    return { argv, exitCode, output, message, startedAt, finishedAt: new Date().toISOString() };
  });
  return { argv, proc, exit, stop: () => stopManaged(proc) };
}
