// The node agent for the model fetch Job's pods on KWOK nodes: what a kubelet would do with
// them, for real. For every Running pod labelled app.kubernetes.io/component=model-fetch it
// runs the pod's container command (the operator image's `node operator/src/cli/model-fetch.ts`,
// here the repository's own file under this Node) as a process, with each volume mount mapped
// to a local directory: a PersistentVolumeClaim to its bound PersistentVolume's hostPath, a
// Secret to a directory of its items (mode 0400), an emptyDir to a fresh directory; the
// container's terminationMessagePath to a file; its env (values and the pod's IP) set and
// `$(VAR)` expanded, so the fetcher serves its progress on the pod IP as in a pod. When the process exits, the pod's status gets
// what a kubelet reports: phase Succeeded or Failed, the container terminated with its exit code
// and its termination message (the file, or with FallbackToLogsOnError and a failure, the log's
// last 2 KiB). KWOK's pod-complete stage leaves these pods alone (kwok-stages.ts), so a Job
// completes only when its fetcher did.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, type V1Container, type V1Pod, type V1Volume } from '@kubernetes/client-node';
import { KubeClient } from '../../operator/src/runtime/client.ts';
import { Informer } from '../../operator/src/runtime/informer.ts';
import type { KubeObject } from '../../operator/src/runtime/objects.ts';
import { Resources } from '../../operator/src/runtime/resources.ts';
import { expandArgs, resolvePlainEnv } from './container-args.ts';
import { RUNNER_LABEL } from './kwok-stages.ts';
import { spawnManaged, stopManaged, type ManagedProcess } from './processes.ts';
import { REPO_ROOT } from './samples.ts';

type PodObject = KubeObject & Pick<V1Pod, 'spec' | 'status'>;
type PvcObject = KubeObject & { spec?: { volumeName?: string } };
type PvObject = KubeObject & { spec?: { hostPath?: { path: string }; local?: { path: string } } };
type SecretObject = KubeObject & { data?: Record<string, string> };

export interface FetchRun {
  readonly pod: string;
  readonly argv: readonly string[];
  /** stdout and stderr of the process, once it ended. */
  output: string;
  exitCode: number | undefined;
  /** When the process ended (ms since the epoch). */
  endedAt: number | undefined;
  /** The termination message reported. */
  message: string;
}

export interface FetchRunner {
  /** Every fetch process run, in start order. */
  readonly runs: readonly FetchRun[];
  stop(): Promise<void>;
}

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
    writeFileSync(join(dir, item.path), Buffer.from(value, 'base64'), { mode: 0o400 });
  }
  return dir;
}

/** The pod's volumes as local directories; undefined while one cannot be resolved yet. */
async function resolveVolumes(
  client: KubeClient,
  pod: PodObject,
  scratch: string,
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
    } else
      throw new Error(
        `volume ${v.name} of pod ${pod.metadata?.name ?? ''} is of a kind this runner cannot map`,
      );
    if (dir === undefined) return undefined;
    dirs.set(v.name, dir);
  }
  return dirs;
}

/** The container's paths mapped to local ones, longest mount first. */
function buildPathMap(
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

export async function startFetchRunner(opts: {
  kubeconfig: string;
  log?: (msg: string) => void;
}): Promise<FetchRunner> {
  const log = opts.log ?? ((): void => undefined);
  const kc = new KubeConfig();
  kc.loadFromFile(opts.kubeconfig);
  const client = await KubeClient.fromKubeConfig(kc);
  const informer = new Informer<PodObject>({
    client,
    resource: Resources.pods,
    labelSelector: `${RUNNER_LABEL.key}=${RUNNER_LABEL.value}`,
  });
  const scratchRoot = mkdtempSync(join(tmpdir(), 'fetch-runner-'));
  const runs: FetchRun[] = [];
  const started = new Set<string>();
  const pending = new Set<Promise<void>>();
  const procs = new Set<ManagedProcess>();
  let stopped = false;

  async function report(pod: PodObject, run: FetchRun, startedAt: string): Promise<void> {
    const container = pod.spec?.containers[0];
    const ok = run.exitCode === 0;
    await client.patch(
      Resources.pods,
      pod.metadata?.namespace ?? '',
      pod.metadata?.name ?? '',
      {
        status: {
          phase: ok ? 'Succeeded' : 'Failed',
          conditions: [
            {
              type: 'Ready',
              status: 'False',
              reason: 'PodCompleted',
              lastTransitionTime: new Date().toISOString(),
            },
            {
              type: 'ContainersReady',
              status: 'False',
              reason: 'PodCompleted',
              lastTransitionTime: new Date().toISOString(),
            },
          ],
          containerStatuses: [
            {
              name: container?.name ?? '',
              image: container?.image ?? '',
              imageID: '',
              ready: false,
              started: false,
              restartCount: 0,
              state: {
                terminated: {
                  exitCode: run.exitCode ?? 137,
                  reason: ok ? 'Completed' : 'Error',
                  ...(run.message ? { message: run.message } : {}),
                  startedAt,
                  finishedAt: new Date().toISOString(),
                },
              },
            },
          ],
        },
      },
      'merge',
      { subresource: 'status' },
    );
  }

  async function runPod(pod: PodObject): Promise<void> {
    const name = pod.metadata?.name ?? '';
    const container = pod.spec?.containers[0];
    if (!container?.command) throw new Error(`pod ${name} has no command to run`);
    const scratch = join(scratchRoot, name);
    mkdirSync(scratch, { recursive: true });
    const volumes = await resolveVolumes(client, pod, scratch);
    if (!volumes) {
      started.delete(name); // the next update of the pod tries again
      return;
    }
    const terminationFile = join(scratch, 'termination-log');
    writeFileSync(terminationFile, '');
    const map = buildPathMap(container, volumes, terminationFile);
    const podEnv = resolvePlainEnv(pod, container);
    const [command, ...rest] = expandArgs([...container.command, ...(container.args ?? [])], podEnv).map(
      (a) => mapContainerPath(a, map),
    );
    // The image runs `node <file>` from its working directory, the repository's layout.
    const argv = rest.map((a, i) => (i === 0 && command === 'node' ? join(REPO_ROOT, a) : a));
    const env = Object.fromEntries(podEnv);
    const run: FetchRun = {
      pod: name,
      argv,
      output: '',
      exitCode: undefined,
      endedAt: undefined,
      message: '',
    };
    runs.push(run);
    const startedAt = new Date().toISOString();
    const logPath = join(scratch, 'log');
    const proc = spawnManaged(
      `fetch ${name}`,
      command === 'node' ? process.execPath : (command ?? ''),
      argv,
      {
        logPath,
        cwd: REPO_ROOT,
        env: { PATH: process.env['PATH'] ?? '', HOME: scratch, ...env },
      },
    );
    procs.add(proc);
    log(`fetch runner: pod ${name} runs ${argv.join(' ')}`);
    const exit = await proc.exited;
    procs.delete(proc);
    run.endedAt = Date.now();
    run.output = readFileSync(logPath, 'utf8');
    run.exitCode = exit.code ?? 137;
    const written = readFileSync(terminationFile, 'utf8').slice(0, MESSAGE_BYTES);
    run.message =
      written !== '' || run.exitCode === 0 || container.terminationMessagePolicy !== 'FallbackToLogsOnError'
        ? written
        : Buffer.from(run.output).subarray(-LOG_TAIL_BYTES).toString('utf8');
    log(`fetch runner: pod ${name} exited ${run.exitCode}`);
    if (!stopped) await report(pod, run, startedAt);
  }

  const consider = (pod: PodObject): void => {
    const name = pod.metadata?.name ?? '';
    if (stopped || pod.metadata?.deletionTimestamp || pod.status?.phase !== 'Running' || started.has(name))
      return;
    started.add(name);
    const p = runPod(pod)
      .catch((e: unknown) => log(`fetch runner: pod ${name}: ${(e as Error).message}`))
      .finally(() => pending.delete(p));
    pending.add(p);
  };
  informer.addEventHandler({
    onAdd: consider,
    onUpdate: (_o, pod) => consider(pod),
    onDelete: () => undefined,
  });
  informer.start();
  await informer.waitForSync();
  return {
    runs,
    async stop() {
      stopped = true;
      await informer.stop();
      await Promise.all([...procs].map((p) => stopManaged(p)));
      await Promise.all([...pending]);
      await client.close();
      rmSync(scratchRoot, { recursive: true, force: true });
    },
  };
}
