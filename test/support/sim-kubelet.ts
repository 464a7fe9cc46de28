// The stand-in for a GPU node's kubelet and its SGLang containers: for every
// Running pod on a fake node it serves an SGLang simulator on the pod's IP,
// launched with the pod's own rendered SGLang arguments (so whatever the
// operator renders is what the "runtime" reports), and stops it when the pod
// goes (after the container's preStop sleep, with `preStop`, as a kubelet runs it: a pod being
// deleted keeps serving that long, then its runtime stops).
// Simulators run in this process: a fleet of hundreds costs no forks.
// Chosen pods get the real SGLang instead (`realSglang`), a process each.
// Needs the private network namespace (hack/in-netns.sh) for pod IPs.
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient } from '../../operator/src/runtime/client.ts';
import { Informer } from '../../operator/src/runtime/informer.ts';
import type { PodObject } from '../../operator/src/controllers/deployment/endpoints.ts';
import { Resources } from '../../operator/src/runtime/resources.ts';
import { ScaledClock } from '../sim/clock.ts';
import { parseSimArgs } from '../sim/config.ts';
import { SimServer, silentLogger } from '../sim/server.ts';
import { startRealSglang, type RealSglang } from './real-sglang.ts';

export interface SimKubeletOptions {
  kubeconfig: string;
  /** Extra simulator flags for one pod (e.g. a fault, or another reported model). */
  extraArgs?: (pod: PodObject) => readonly string[];
  /**
   * Pods that get the real SGLang (the pinned release on CPU, `kit serve`) instead of a
   * simulator, launched with the pod's own arguments; returns extra SGLang flags for it, or
   * undefined for a simulator. At most two at once on this machine (real-sglang.ts).
   */
  realSglang?: (pod: PodObject) => readonly string[] | undefined;
  log?: (msg: string) => void;
  /**
   * Run a deleted pod's preStop sleep before stopping its runtime, as a kubelet does. Off by
   * default: KWOK hands a deleted pod's IP to the next pod at once, and a runtime still serving
   * on it would answer for the new pod (a real node gives each pod its own namespace).
   */
  preStop?: boolean;
}

export interface RunningPodReal {
  pod: string;
  ip: string;
  argv: readonly string[];
  sglang: RealSglang;
}

export interface RunningPodSim {
  pod: string;
  ip: string;
  argv: readonly string[];
  server: SimServer;
}

export interface SimKubelet {
  /** Simulators by pod name. */
  readonly sims: ReadonlyMap<string, RunningPodSim>;
  /** Real SGLang servers by pod name. */
  readonly reals: ReadonlyMap<string, RunningPodReal>;
  stop(): Promise<void>;
}

const SGLANG_CONTAINER = 'sglang';
const VERSION_LABEL = 'app.kubernetes.io/version';

/** The simulator command line for a pod: its container args, bound to the pod IP. */
export function buildSimArgv(pod: PodObject, extra: readonly string[] = []): string[] | undefined {
  const container = pod.spec?.containers.find((c) => c.name === SGLANG_CONTAINER);
  const ip = pod.status?.podIP;
  if (!container || !ip) return undefined;
  const version = pod.metadata?.labels?.[VERSION_LABEL];
  // argparse keeps the last occurrence: the pod IP overrides the rendered 0.0.0.0.
  return [
    ...(container.args ?? []),
    '--host',
    ip,
    '--sim-worker-id',
    pod.metadata?.name ?? ip,
    // Event sockets on the pod IP: in a pod, tcp://*:5557 is the pod's own; here pods share a namespace.
    '--sim-bind-host',
    ip,
    ...(version ? ['--sim-version', version] : []),
    ...extra,
  ];
}

export async function startSimKubelet(opts: SimKubeletOptions): Promise<SimKubelet> {
  const log = opts.log ?? ((): void => undefined);
  const kc = new KubeConfig();
  kc.loadFromFile(opts.kubeconfig);
  const client = await KubeClient.fromKubeConfig(kc);
  const informer = new Informer<PodObject>({ client, resource: Resources.pods });
  const sims = new Map<string, RunningPodSim>();
  // Start/stop per pod are serialized so a quick delete-and-recreate never races.
  let chain = Promise.resolve();
  const enqueue = (fn: () => Promise<void>): void => {
    chain = chain.then(fn).catch((err: unknown) => log(`sim-kubelet: ${(err as Error).message}`));
  };

  const reals = new Map<string, RunningPodReal>();
  // Pods being deleted, serving out their preStop sleep.
  const terminating = new Map<string, NodeJS.Timeout>();

  /** What a kubelet does for a deleted pod: run the preStop sleep, then stop the runtime. */
  function stopAfterPreStop(pod: PodObject): void {
    const name = pod.metadata?.name ?? '';
    if (terminating.has(name) || !(sims.has(name) || reals.has(name))) return;
    const container = pod.spec?.containers.find((c) => c.name === SGLANG_CONTAINER);
    const sleepMs = opts.preStop ? (container?.lifecycle?.preStop?.sleep?.seconds ?? 0) * 1000 : 0;
    if (sleepMs <= 0) return enqueue(() => stopSim(name));
    const timer = setTimeout(() => {
      terminating.delete(name);
      enqueue(() => stopSim(name));
    }, sleepMs);
    terminating.set(name, timer);
    log(`pod ${name} is terminating: its runtime serves ${sleepMs} ms more (preStop)`);
  }

  async function stopSim(name: string): Promise<void> {
    const real = reals.get(name);
    if (real) {
      reals.delete(name);
      await real.sglang.stop();
      log(`stopped real SGLang for ${name}`);
    }
    const sim = sims.get(name);
    if (!sim) return;
    sims.delete(name);
    await sim.server.close();
    log(`stopped simulator for ${name}`);
  }

  /** The real server for a pod: its container args, bound to the pod IP and its port. */
  async function startReal(pod: PodObject, extra: readonly string[]): Promise<void> {
    const name = pod.metadata?.name ?? '';
    const ip = pod.status?.podIP ?? '';
    const container = pod.spec?.containers.find((c) => c.name === SGLANG_CONTAINER);
    const argv = [...(container?.args ?? []), ...extra];
    const parsed = parseSimArgs(argv);
    if (!parsed.ok) {
      log(`real SGLang for ${name} refused its arguments: ${parsed.error}`);
      return;
    }
    const sglang = await startRealSglang({ args: argv, host: ip, port: parsed.value.sglang.port });
    reals.set(name, { pod: name, ip, argv, sglang });
    log(`real SGLang for ${name} on ${ip}:${parsed.value.sglang.port} (${Math.round(sglang.startupMs)} ms)`);
  }

  async function startSim(pod: PodObject, argv: readonly string[]): Promise<void> {
    const name = pod.metadata?.name ?? '';
    const parsed = parseSimArgs(argv);
    if (!parsed.ok) {
      // What SGLang itself would do with a bad command line: exit, and the pod never gets ready.
      log(`simulator for ${name} refused its arguments: ${parsed.error}`);
      return;
    }
    const clock = new ScaledClock(parsed.value.sim.timeScale);
    const server = new SimServer(parsed.value, {
      clock,
      logger: silentLogger,
      crash: () => enqueue(() => stopSim(name)),
      toWallMs: (ms) => clock.toWallMs(ms),
    });
    await server.listen();
    sims.set(name, { pod: name, ip: pod.status?.podIP ?? '', argv, server });
    log(`simulator for ${name} on ${pod.status?.podIP ?? ''}:${parsed.value.sglang.port}`);
  }

  async function reconcile(pod: PodObject): Promise<void> {
    if (pod.metadata?.deletionTimestamp) return stopAfterPreStop(pod);
    const name = pod.metadata?.name ?? '';
    const running = pod.status?.phase === 'Running';
    const argv = running ? buildSimArgv(pod, opts.extraArgs?.(pod) ?? []) : undefined;
    const current = sims.get(name) ?? reals.get(name);
    if (current && (!argv || current.ip !== pod.status?.podIP)) await stopSim(name);
    if (!argv || sims.has(name) || reals.has(name)) return;
    const real = opts.realSglang?.(pod);
    await (real ? startReal(pod, real) : startSim(pod, argv));
  }

  informer.addEventHandler({
    onAdd: (pod) => enqueue(() => reconcile(pod)),
    onUpdate: (_old, pod) => enqueue(() => reconcile(pod)),
    onDelete: (pod) => stopAfterPreStop(pod),
  });
  informer.start();
  await informer.waitForSync();
  return {
    sims,
    reals,
    async stop() {
      await informer.stop();
      for (const timer of terminating.values()) clearTimeout(timer);
      terminating.clear();
      await chain;
      await Promise.all([...sims.keys(), ...reals.keys()].map((n) => stopSim(n)));
      await client.close();
    },
  };
}
