// A private containerd for the image tests (test/e2e/images.test.ts): its own root, state
// and socket under a temp dir, started by the test inside hack/in-netns.sh, so containers
// run with --net-host share the test's private network namespace (they join the network
// namespace of the shim, which is containerd's), reach the control plane and the pod IPs,
// and nothing listens on the machine's network. Images come in as OCI archives (the ones
// hack/images/build.sh writes) and run with `ctr run`, under runc.
//
// ctr cannot set every field of a pod's securityContext: buildCtrSecurityFlags maps the
// ones it can (read-only root filesystem, dropped capabilities, no new privileges, the
// runtime's default seccomp profile) and leaves runAsUser to the image (its USER): the
// tests read the uid the process got from /proc.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { z } from 'zod';
import { readLogTail, registerCleanup, spawnManaged, stopManaged, type ManagedProcess } from './processes.ts';

// The capabilities containerd gives a container by default (oci.defaultUnixCaps): what
// `drop: [ALL]` has to take away, since ctr only drops capabilities by name.
export const CTR_DEFAULT_CAPABILITIES = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FSETID',
  'CAP_FOWNER',
  'CAP_MKNOD',
  'CAP_NET_RAW',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETFCAP',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_SYS_CHROOT',
  'CAP_KILL',
  'CAP_AUDIT_WRITE',
] as const;

// The parts of a Kubernetes (pod and container) securityContext ctr can express.
export const SecurityContext = z.object({
  readOnlyRootFilesystem: z.boolean().optional(),
  allowPrivilegeEscalation: z.boolean().optional(),
  capabilities: z.object({ drop: z.array(z.string()).optional() }).optional(),
  seccompProfile: z.object({ type: z.string() }).optional(),
  runAsUser: z.number().int().optional(),
  runAsGroup: z.number().int().optional(),
  runAsNonRoot: z.boolean().optional(),
});
export type SecurityContext = z.infer<typeof SecurityContext>;

/** `ctr run` flags for a securityContext (pod and container fields merged). Throws on what ctr cannot do. */
export function buildCtrSecurityFlags(sc: SecurityContext): string[] {
  const flags: string[] = [];
  if (sc.readOnlyRootFilesystem) flags.push('--read-only');
  // ctr sets NoNewPrivileges unless told otherwise.
  if (sc.allowPrivilegeEscalation !== false) flags.push('--allow-new-privs');
  for (const cap of sc.capabilities?.drop ?? []) {
    const names = cap === 'ALL' ? CTR_DEFAULT_CAPABILITIES : [cap.startsWith('CAP_') ? cap : `CAP_${cap}`];
    for (const name of names) flags.push('--cap-drop', name);
  }
  const seccomp = sc.seccompProfile?.type;
  if (seccomp === 'RuntimeDefault') flags.push('--seccomp');
  else if (seccomp !== undefined && seccomp !== 'Unconfined')
    throw new Error(`seccompProfile ${seccomp}: ctr runs only RuntimeDefault or Unconfined`);
  return flags;
}

export interface ContainerSpec {
  name: string;
  image: string;
  /** The command line; the image's entrypoint is not prepended (ctr replaces the whole of it). */
  command: readonly string[];
  securityContext: SecurityContext;
  env?: Readonly<Record<string, string>>;
  /** Read-only bind mounts, host path → container path. */
  mounts?: readonly { source: string; destination: string }[];
  /** A tmpfs at /tmp (the chart's emptyDir), MiB; default 64. */
  tmpMiB?: number;
}

/** `ctr run` arguments for a detached container whose output goes to logPath. */
export function buildCtrRunArgs(spec: ContainerSpec, logPath: string): string[] {
  const args = ['run', '--detach', '--log-uri', `file://${logPath}`, '--net-host'];
  args.push(...buildCtrSecurityFlags(spec.securityContext));
  args.push('--mount', `type=tmpfs,src=tmpfs,dst=/tmp,options=nosuid:nodev:size=${spec.tmpMiB ?? 64}m`);
  for (const m of spec.mounts ?? []) {
    args.push('--mount', `type=bind,src=${m.source},dst=${m.destination},options=rbind:ro`);
  }
  for (const [k, v] of Object.entries(spec.env ?? {})) args.push('--env', `${k}=${v}`);
  args.push(spec.image, spec.name, ...spec.command);
  return args;
}

/** containerd's config: everything under dir, no CRI (ctr needs none), no TCP listeners. */
export function buildContainerdConfig(dir: string): string {
  return [
    'version = 2',
    `root = ${JSON.stringify(join(dir, 'root'))}`,
    `state = ${JSON.stringify(join(dir, 'state'))}`,
    'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
    '[grpc]',
    `  address = ${JSON.stringify(join(dir, 'containerd.sock'))}`,
    '[ttrpc]',
    `  address = ${JSON.stringify(join(dir, 'containerd.ttrpc.sock'))}`,
    '',
  ].join('\n');
}

export interface TaskInfo {
  name: string;
  pid: number;
  status: string;
}

/** `ctr task ls` output: TASK PID STATUS rows after a header. */
export function parseTaskList(text: string): TaskInfo[] {
  return text
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((cols) => cols.length === 3)
    .map(([name = '', pid = '', status = '']) => ({ name, pid: Number(pid), status }));
}

export interface ImportedImage {
  ref: string;
  digest: string;
}

/** `ctr images import` output: `unpacking <ref> (sha256:...)...done` per image. */
export function parseImportOutput(text: string): ImportedImage[] {
  return [...text.matchAll(/^unpacking (\S+) \((sha256:[0-9a-f]{64})\)/gm)].map((m) => ({
    ref: m[1] ?? '',
    digest: m[2] ?? '',
  }));
}

export interface RunningContainer {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
  /** The task's status (RUNNING, STOPPED), undefined once deleted. */
  status(): Promise<string | undefined>;
  logTail(): string;
  /** SIGTERM, SIGKILL after graceMs, then the task and the container are deleted. */
  stop(graceMs?: number): Promise<void>;
}

export interface Containerd {
  readonly dir: string;
  readonly address: string;
  /** The containerd namespace of its images and containers (ctr --namespace). */
  readonly namespace: string;
  ctr(args: readonly string[], opts?: { timeoutMs?: number }): Promise<string>;
  importArchive(path: string): Promise<ImportedImage[]>;
  run(spec: ContainerSpec): Promise<RunningContainer>;
  /** Stops every container still running, then containerd; removes dir. Idempotent. */
  stop(): Promise<void>;
}

// runc puts each container's cgroup at /sys/fs/cgroup/<hierarchy>/<containerd namespace>/<id>
// on the machine's cgroup file system, which no network or PID namespace hides; the
// container's own goes with it, the namespace's directory is removed here once empty.
function removeNamespaceCgroups(namespace: string): void {
  let hierarchies: string[];
  try {
    hierarchies = readdirSync('/sys/fs/cgroup');
  } catch {
    return;
  }
  for (const h of hierarchies) {
    try {
      rmdirSync(join('/sys/fs/cgroup', h, namespace));
    } catch {
      // absent, or still in use
    }
  }
}

export async function startContainerd(opts: { log?: (msg: string) => void } = {}): Promise<Containerd> {
  const log = opts.log ?? ((msg: string) => void process.stderr.write(`[containerd] ${msg}\n`));
  if (process.env['CACHEROUTE_NETNS'] !== '1') {
    throw new Error('containerd runs inside a private network namespace: bash hack/in-netns.sh <command>');
  }
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-containerd-'));
  const address = join(dir, 'containerd.sock');
  // Its own containerd namespace, hence its own cgroup directories, per instance.
  const namespace = basename(dir);
  writeFileSync(join(dir, 'config.toml'), buildContainerdConfig(dir));
  mkdirSync(join(dir, 'logs'));
  const removeDir = (): void => {
    removeNamespaceCgroups(namespace);
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  };
  const unregister = registerCleanup(removeDir);
  const proc: ManagedProcess = spawnManaged(
    'containerd',
    'containerd',
    ['--config', join(dir, 'config.toml')],
    {
      logPath: join(dir, 'containerd.log'),
    },
  );

  const ctr = (args: readonly string[], o: { timeoutMs?: number } = {}): Promise<string> =>
    new Promise((resolve, reject) => {
      execFile(
        'ctr',
        ['--address', address, '--namespace', namespace, ...args],
        { timeout: o.timeoutMs ?? 60_000, maxBuffer: 16 * 1024 * 1024 },
        (err, stdout, stderr) => {
          if (err)
            reject(new Error(`ctr ${args.join(' ')}: ${stderr.trim() || err.message}`, { cause: err }));
          else resolve(stdout);
        },
      );
    });

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (!proc.isRunning()) throw new Error(`containerd exited at start:\n${readLogTail(proc.logPath)}`);
    if (
      await ctr(['version'], { timeoutMs: 5_000 }).then(
        () => true,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline)
      throw new Error(`containerd did not answer in 30 s:\n${readLogTail(proc.logPath)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  log(`containerd ready (${dir})`);

  const containers = new Map<string, RunningContainer>();
  const taskStatus = async (name: string): Promise<TaskInfo | undefined> =>
    parseTaskList(await ctr(['task', 'ls'])).find((t) => t.name === name);

  const run = async (spec: ContainerSpec): Promise<RunningContainer> => {
    const logPath = join(dir, 'logs', `${spec.name}.log`);
    await ctr(buildCtrRunArgs(spec, logPath));
    const task = await taskStatus(spec.name);
    if (!task) throw new Error(`${spec.name}: no task after ctr run`);
    let stopped = false;
    const container: RunningContainer = {
      name: spec.name,
      pid: task.pid,
      logPath,
      status: async () => (await taskStatus(spec.name))?.status,
      logTail: () => readLogTail(logPath),
      stop: async (graceMs = 5_000) => {
        if (stopped) return;
        stopped = true;
        containers.delete(spec.name);
        const until = Date.now() + graceMs;
        await ctr(['task', 'kill', '--signal', 'SIGTERM', spec.name]).catch(() => undefined);
        while ((await taskStatus(spec.name))?.status === 'RUNNING' && Date.now() < until) {
          await new Promise((r) => setTimeout(r, 100));
        }
        await ctr(['task', 'delete', '--force', spec.name]).catch(() => undefined);
        await ctr(['container', 'rm', spec.name]).catch(() => undefined);
      },
    };
    containers.set(spec.name, container);
    return container;
  };

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      for (const c of [...containers.values()]) await c.stop(2_000);
      await stopManaged(proc);
      unregister();
      removeDir();
    })());

  return {
    dir,
    address,
    namespace,
    ctr,
    importArchive: async (path) =>
      parseImportOutput(await ctr(['images', 'import', path], { timeoutMs: 300_000 })),
    run,
    stop,
  };
}
