// The stand-in for a GPU node's kubelet and its SGLang containers: for every
// Running pod on a fake node it serves an SGLang simulator on the pod's IP,
// launched with the pod's own rendered SGLang arguments (so whatever the
// operator renders is what the "runtime" reports), and stops it when the pod
// goes as a kubelet does (kubelet-termination.ts): the container's preStop sleep, SIGTERM (the
// runtime drains and exits once idle), SIGKILL at the end of the grace period.
// A pod IP is never handed on while a runtime still serves on it: a pod this kubelet runs a
// runtime for carries its finalizer until the runtime exited, and KWOK recycles a pod's IP only
// once the pod object is gone (a real node has a network namespace per pod, and the pod
// object too stays, Terminating, until its kubelet saw its containers stop).
// A pod with readiness gates is Ready once its containers are and every gate is True
// (kubelet-readiness.ts): the operator's cacheroute.dev/verified gate holds a rollout.
// Simulators run in this process: a fleet of hundreds costs no forks.
// Chosen pods get the real SGLang instead (`realSglang`), a process each.
// As a kubelet, it resolves the container's env (values, and Secret keys it
// reads from the API server) and expands `$(VAR)` in the args with it: that
// is how a pod's runtime gets its API key (`--api-key $(…)`). A Secret key
// not there yet keeps the runtime from starting, retried every second.
// A pod's init containers run first, for real, each a local process as the fetch runner runs
// its pods (init-containers.ts, container-process.ts): in order, reported in the pod's status,
// a failed one retried after a crash-loop backoff; the runtime starts only once all completed.
// A hostPath volume is a directory of the pod's node's own tree under `nodeRoot`, so each fake
// node keeps its own files (a per-node cache is filled once per node). Pods without init
// containers fork nothing.
// A Mooncake store's pod (HiCache's mooncake L3) runs its real processes (mooncake-pod.ts), and a
// real server's env naming a Service gets a pod IP it selects, as cluster DNS would give.
// Needs the private network namespace (hack/in-netns.sh) for pod IPs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, type V1Container } from '@kubernetes/client-node';
import { KubeClient } from '#kube/client.ts';
import { Informer } from '#kube/informer.ts';
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';
import { Resources } from '#kube/resources.ts';
import { ScaledClock } from '../sim/clock.ts';
import { parseSimArgs } from '../sim/config.ts';
import { SimServer, silentLogger } from '../sim/server.ts';
import { expandArgs } from './container-args.ts';
import {
  buildHostPathDir,
  mapContainerPath,
  resolveClaimMounts,
  resolveContainerEnv,
} from './container-process.ts';
import { KUBELET_BACKOFF, startInitContainers, type InitBackoff, type InitRun } from './init-containers.ts';
import { hasFreeRealSlot, MAX_REAL_SERVERS, startRealSglang, type RealSglang } from './real-sglang.ts';
import {
  isMooncakePod,
  resolveServiceNames,
  startMooncakePod,
  type RunningStorePod,
} from './mooncake-pod.ts';
import { buildReadyPatch, computeGatedReady } from './kubelet-readiness.ts';
import { planTermination, runTermination, type TerminatingRuntime } from './kubelet-termination.ts';

/** Held on a pod while its runtime runs here: its IP is not KWOK's to hand on until it is gone. */
export const RUNTIME_FINALIZER = 'cacheroute.dev/sim-kubelet-runtime';

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
   * Terminate a deleted pod's runtime as a kubelet does: preStop sleep, SIGTERM, SIGKILL after
   * the grace period (default). false: stop it at once, as KWOK alone would.
   */
  preStop?: boolean;
  /**
   * Checked before a pod's runtime starts; false: it does not start (as SGLang exits on model
   * files it cannot load), and the pod's next update asks again.
   */
  canStart?: (pod: PodObject) => Promise<boolean>;
  /** Where each fake node's hostPath trees are (`<nodeRoot>/<node>/<path>`); default: a fresh temp dir. */
  nodeRoot?: string;
  /** The crash-loop backoff of a failed init container (default a kubelet's: 10 s doubling to 40 s). */
  initBackoff?: InitBackoff;
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
  /** Real SGLang servers by pod name, once each answers /health. */
  readonly reals: ReadonlyMap<string, RunningPodReal>;
  /**
   * A pod's real server once it answers /health; rejects with why its start failed. The
   * operator may verify a pod before then (its /server_info answers during SGLang's warm-up,
   * and KWOK has no readiness probe), so a test that found a verified endpoint waits here.
   */
  realReady(pod: string): Promise<RunningPodReal>;
  /** Mooncake store pods running their real processes, by pod name. */
  readonly stores: ReadonlyMap<string, RunningStorePod>;
  /** Where each fake node's hostPath trees are. */
  readonly nodeRoot: string;
  /** The local directory of a hostPath on a node. */
  hostPathOn(nodeName: string, path: string): string;
  stop(): Promise<void>;
}

const SGLANG_CONTAINER = 'sglang';
const VERSION_LABEL = 'app.kubernetes.io/version';

/** The header a test sends a pod's runtime directly: its API key, from its (expanded) command line. */
export function buildRuntimeAuthHeader(argv: readonly string[]): Record<string, string> {
  const at = argv.lastIndexOf('--api-key');
  const key = at < 0 ? undefined : argv[at + 1];
  return key ? { authorization: `Bearer ${key}` } : {};
}

/**
 * The header that opens a pod's real runtime, once its server answers /health: the operator may
 * verify the pod earlier (realReady), so this waits for the kubelet's outcome of the start, and
 * rejects saying why it failed, instead of polling for a fixed time.
 */
export async function realRuntimeAuth(
  kubelet: Pick<SimKubelet, 'realReady'>,
  pod: string,
): Promise<Record<string, string>> {
  return buildRuntimeAuthHeader((await kubelet.realReady(pod)).argv);
}

/** The simulator command line for a pod: its container args (env expanded), bound to the pod IP. */
export function buildSimArgv(
  pod: PodObject,
  extra: readonly string[] = [],
  env: ReadonlyMap<string, string> = new Map(),
): string[] | undefined {
  const container = pod.spec?.containers.find((c) => c.name === SGLANG_CONTAINER);
  const ip = pod.status?.podIP;
  if (!container || !ip) return undefined;
  const version = pod.metadata?.labels?.[VERSION_LABEL];
  // argparse keeps the last occurrence: the pod IP overrides the rendered 0.0.0.0.
  return [
    ...expandArgs(container.args ?? [], env),
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
  // Mooncake store pods on a chain of their own: a real server starting waits for its store's
  // master (SGLang retries the connect), so the store must not queue behind it.
  let storeChain = Promise.resolve();
  const enqueueStore = (fn: () => Promise<void>): void => {
    storeChain = storeChain.then(fn).catch((err: unknown) => log(`sim-kubelet: ${(err as Error).message}`));
  };
  const enqueueFor = (pod: PodObject, fn: () => Promise<void>): void =>
    (isMooncakePod(pod) ? enqueueStore : enqueue)(fn);

  const reals = new Map<string, RunningPodReal>();
  // How each pod's real start ended, for realReady: its waiters, or why it failed.
  const realWaiters = new Map<
    string,
    { resolve: (r: RunningPodReal) => void; reject: (e: Error) => void }[]
  >();
  const realFailures = new Map<string, Error>();
  function settleReal(name: string, outcome: RunningPodReal | Error): void {
    if (outcome instanceof Error) realFailures.set(name, outcome);
    else realFailures.delete(name);
    for (const w of realWaiters.get(name) ?? []) {
      if (outcome instanceof Error) w.reject(outcome);
      else w.resolve(outcome);
    }
    realWaiters.delete(name);
  }
  function realReady(name: string): Promise<RunningPodReal> {
    const running = reals.get(name);
    if (running) return Promise.resolve(running);
    const failed = realFailures.get(name);
    if (failed) return Promise.reject(failed);
    return new Promise((resolve, reject) =>
      realWaiters.set(name, [...(realWaiters.get(name) ?? []), { resolve, reject }]),
    );
  }
  const stores = new Map<string, RunningStorePod>();

  // Pods being deleted, their runtimes terminating; aborted when the kubelet stops (SIGKILL at once).
  const terminating = new Map<string, { abort: AbortController; done: Promise<void> }>();
  // The grace a deletion first carried, by pod uid: KWOK's grace-0 delete that follows does not shorten it.
  const firstGrace = new Map<string, number>();

  /** What a kubelet does for a deleted pod: preStop, SIGTERM, SIGKILL after the grace; then the pod may go. */
  function terminate(pod: PodObject): void {
    const name = pod.metadata?.name ?? '';
    const uid = pod.metadata?.uid ?? '';
    const grace = pod.metadata?.deletionGracePeriodSeconds;
    if (grace !== undefined && grace > 0 && !firstGrace.has(uid)) firstGrace.set(uid, grace);
    if (terminating.has(name)) return;
    if (stores.has(name)) {
      enqueueStore(() => stopSim(name).then(() => releasePod(pod)));
      return;
    }
    if (!(sims.has(name) || reals.has(name))) return void releasePod(pod);
    const plan =
      opts.preStop === false
        ? { preStopMs: 0, graceMs: 0 }
        : planTermination(pod, SGLANG_CONTAINER, firstGrace.get(uid));
    const abort = new AbortController();
    log(`pod ${name} is terminating: preStop ${plan.preStopMs} ms, grace ${plan.graceMs} ms`);
    const runtime: TerminatingRuntime = {
      sigterm: async () => {
        const sim = sims.get(name);
        if (sim) await sim.server.terminate();
        // The real server: SIGTERM, and its own SIGKILL after 10 s (real-sglang.ts).
        else await reals.get(name)?.sglang.stop();
      },
      sigkill: () => new Promise<void>((resolve) => enqueue(() => stopSim(name).finally(resolve))),
    };
    const done = runTermination(plan, runtime, abort.signal)
      .then((outcome) =>
        log(`runtime of ${name} ${outcome === 'exited' ? 'exited' : 'killed at the grace end'}`),
      )
      .then(() => releasePod(pod))
      .catch((err: unknown) => log(`sim-kubelet: terminating ${name}: ${(err as Error).message}`))
      .finally(() => {
        terminating.delete(name);
        firstGrace.delete(uid);
      });
    terminating.set(name, { abort, done });
  }

  /** The runtime is gone: drop the finalizer, and delete the pod for good as a kubelet does. */
  async function releasePod(pod: PodObject): Promise<void> {
    if (!pod.metadata?.finalizers?.includes(RUNTIME_FINALIZER)) return;
    const namespace = pod.metadata.namespace ?? '';
    const name = pod.metadata.name ?? '';
    const uid = pod.metadata.uid ?? '';
    const live = await client.get<PodObject>(Resources.pods, namespace, name);
    if (!live || live.metadata?.uid !== uid) return;
    if (live.metadata.finalizers?.includes(RUNTIME_FINALIZER))
      await client.patch(
        Resources.pods,
        namespace,
        name,
        { metadata: { '$deleteFromPrimitiveList/finalizers': [RUNTIME_FINALIZER] } },
        'strategic',
      );
    if (live.metadata.deletionTimestamp)
      await client.delete(Resources.pods, namespace, name, { uid, gracePeriodSeconds: 0 });
  }

  /** Before a runtime starts on a pod's IP: the pod holds it until the runtime is gone. False: the pod is going. */
  async function holdPod(pod: PodObject): Promise<boolean> {
    if (pod.metadata?.finalizers?.includes(RUNTIME_FINALIZER)) return true;
    try {
      await client.patch(
        Resources.pods,
        pod.metadata?.namespace ?? '',
        pod.metadata?.name ?? '',
        { metadata: { uid: pod.metadata?.uid, finalizers: [RUNTIME_FINALIZER] } },
        'strategic',
      );
      return true;
    } catch (err) {
      log(`runtime for ${pod.metadata?.name ?? ''} not started: ${(err as Error).message}`);
      return false;
    }
  }

  /** A gated pod's Ready, as the kubelet's status manager keeps it. */
  async function syncReady(pod: PodObject): Promise<void> {
    const want = computeGatedReady(pod);
    const patch = want && buildReadyPatch(pod, want, new Date());
    if (!patch) return;
    await client
      .patch(Resources.pods, pod.metadata?.namespace ?? '', pod.metadata?.name ?? '', patch, 'strategic', {
        subresource: 'status',
      })
      .catch((err: unknown) =>
        log(`sim-kubelet: Ready of ${pod.metadata?.name ?? ''}: ${(err as Error).message}`),
      );
  }

  async function stopSim(name: string): Promise<void> {
    const store = stores.get(name);
    if (store) {
      stores.delete(name);
      await store.stop();
      log(`stopped mooncake store ${name}`);
    }
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
  async function startReal(
    pod: PodObject,
    extra: readonly string[],
    env: ReadonlyMap<string, string>,
    claims: readonly [string, string][],
  ): Promise<void> {
    const name = pod.metadata?.name ?? '';
    const ip = pod.status?.podIP ?? '';
    const container = pod.spec?.containers.find((c) => c.name === SGLANG_CONTAINER);
    const argv = [...expandArgs(container?.args ?? [], env), ...extra];
    const parsed = parseSimArgs(argv);
    if (!parsed.ok) {
      log(`real SGLang for ${name} refused its arguments: ${parsed.error}`);
      settleReal(name, new Error(`real SGLang for ${name} refused its arguments: ${parsed.error}`));
      return;
    }
    // The pod's env, a path under a claim's mount (HiCache's L3 directory) mapped to its local directory.
    const podEnv = Object.fromEntries([...env].map(([k, v]) => [k, mapContainerPath(v, claims)]));
    let sglang: RealSglang;
    try {
      sglang = await startRealSglang({ args: argv, host: ip, port: parsed.value.sglang.port, env: podEnv });
    } catch (err) {
      settleReal(name, new Error(`real SGLang for ${name} did not start: ${(err as Error).message}`));
      throw err;
    }
    const real = { pod: name, ip, argv, sglang };
    reals.set(name, real);
    settleReal(name, real);
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
    if (pod.metadata?.deletionTimestamp) return forgetPod(pod);
    if (isMooncakePod(pod)) return reconcileStore(pod);
    if (pod.spec?.containers.some((c) => c.name === SGLANG_CONTAINER)) await syncReady(pod);
    const name = pod.metadata?.name ?? '';
    const running = pod.status?.phase === 'Running';
    const current = sims.get(name) ?? reals.get(name);
    if (current && (!running || current.ip !== pod.status?.podIP)) await stopSim(name);
    if (!running || sims.has(name) || reals.has(name)) return;
    if (!isInitialized(pod)) return;
    await startRuntime(pod);
  }

  /** A Mooncake store pod: its processes while it runs on its IP, held by the finalizer as a runtime. */
  async function reconcileStore(pod: PodObject): Promise<void> {
    const name = pod.metadata?.name ?? '';
    const running = pod.status?.phase === 'Running' && pod.status.podIP;
    const current = stores.get(name);
    if (current && (!running || current.ip !== pod.status?.podIP)) await stopSim(name);
    if (!running || stores.has(name) || stopped) return;
    if (!(await holdPod(pod))) return;
    const store = await startMooncakePod(client, pod, log);
    if (!store) return reconcileLater(pod.metadata?.namespace ?? '', name);
    stores.set(name, store);
  }

  const scratchRoot = mkdtempSync(join(tmpdir(), 'sim-kubelet-'));
  const nodeRoot = opts.nodeRoot ?? mkdtempSync(join(tmpdir(), 'sim-kubelet-nodes-'));
  // Init containers running, and the pods (by name, with their uid) whose init containers completed.
  const initRuns = new Map<string, { uid: string; run: InitRun }>();
  const initialized = new Map<string, string>();
  // Pods whose real server waits for one of the machine's slots (said once in the log).
  const waitingForSlot = new Set<string>();

  /** A deleted pod: its init containers stop, its runtime terminates as on a node. */
  function forgetPod(pod: PodObject): void {
    const name = pod.metadata?.name ?? '';
    if (realWaiters.has(name))
      settleReal(name, new Error(`pod ${name} was deleted before its server answered`));
    initialized.delete(name);
    waitingForSlot.delete(name);
    const init = initRuns.get(name);
    if (init && init.uid === pod.metadata?.uid) {
      initRuns.delete(name);
      void init.run.cancel();
    }
    terminate(pod);
  }

  /**
   * True when the pod's init containers (if any) have all completed; otherwise runs them (once),
   * and the pod is reconciled again when they have. Only pods with a runtime here are this kubelet's.
   */
  function isInitialized(pod: PodObject): boolean {
    const name = pod.metadata?.name ?? '';
    const uid = pod.metadata?.uid ?? '';
    if (!pod.spec?.initContainers?.length || initialized.get(name) === uid) return true;
    if (!pod.spec.containers.some((c) => c.name === SGLANG_CONTAINER)) return false;
    const before = initRuns.get(name);
    if (before?.uid === uid) return false;
    if (before) void before.run.cancel(); // a pod of the same name before this one
    const namespace = pod.metadata?.namespace ?? '';
    const run = startInitContainers({
      client,
      pod,
      dir: join(scratchRoot, `${namespace}-${name}-${uid}`),
      nodeRoot,
      backoff: opts.initBackoff ?? KUBELET_BACKOFF,
      latest: () => informer.get(namespace, name),
      log,
    });
    initRuns.set(name, { uid, run });
    void run.done.then((ok) => {
      if (initRuns.get(name)?.run === run) initRuns.delete(name);
      if (!ok || stopped) return;
      initialized.set(name, uid);
      const latest = informer.get(namespace, name);
      if (latest?.metadata?.uid === uid) enqueue(() => reconcile(latest));
    });
    return false;
  }

  /** The pod's runtime, once its env resolves; a kubelet retries a container it cannot configure yet. */
  /** The runtime container's env and, for a real server, its claims' directories; undefined: not yet. */
  async function resolveRuntimeInputs(pod: PodObject, container: V1Container | undefined) {
    const declared = await resolveContainerEnv(client, pod, container, log);
    if (!declared || !opts.realSglang?.(pod)) return declared && { env: declared, claims: [] };
    // A real server's Services (HiCache's Mooncake master) by a pod IP; not there yet: retried.
    const env = await resolveServiceNames(client, declared);
    // A real server's shared claims (HiCache's L3 volume) are local directories; unbound: retried.
    const claims = await resolveClaimMounts(client, pod, container);
    return env && claims && { env, claims };
  }

  /** Reconciles the pod again in a second: what it waits for may not bring an event of its own. */
  function reconcileLater(namespace: string, name: string): void {
    setTimeout(() => {
      const latest = informer.get(namespace, name);
      if (latest && !stopped) enqueueFor(latest, () => reconcile(latest));
    }, 1000).unref();
  }

  async function startRuntime(pod: PodObject): Promise<void> {
    const namespace = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    const container = pod.spec?.containers.find((c) => c.name === SGLANG_CONTAINER);
    const inputs = await resolveRuntimeInputs(pod, container);
    if (!inputs) return reconcileLater(namespace, name);
    const { env, claims } = inputs;
    const argv = buildSimArgv(pod, opts.extraArgs?.(pod) ?? [], env);
    if (!argv) return;
    if (opts.canStart && !(await opts.canStart(pod))) {
      log(`runtime for ${name} not started: canStart refused it`);
      return;
    }
    const real = opts.realSglang?.(pod);
    // The machine's real servers all taken (a deleted pod's runtime still in its preStop and
    // drain): a kubelet would retry a container that failed to start, so this waits for one to
    // exit instead of leaving the pod running without a runtime.
    if (real && !hasFreeRealSlot()) {
      if (!waitingForSlot.has(name))
        log(`real SGLang for ${name} waits: ${MAX_REAL_SERVERS} real servers run`);
      waitingForSlot.add(name);
      return reconcileLater(namespace, name);
    }
    waitingForSlot.delete(name);
    if (!(await holdPod(pod))) return;
    await (real ? startReal(pod, real, env, claims) : startSim(pod, argv));
  }

  let stopped = false;
  informer.addEventHandler({
    onAdd: (pod) => enqueueFor(pod, () => reconcile(pod)),
    onUpdate: (_old, pod) => enqueueFor(pod, () => reconcile(pod)),
    onDelete: (pod) => forgetPod(pod),
  });
  informer.start();
  await informer.waitForSync();
  return {
    sims,
    reals,
    realReady,
    stores,
    nodeRoot,
    hostPathOn: (nodeName, path) => buildHostPathDir(nodeRoot, nodeName, path),
    async stop() {
      stopped = true;
      for (const name of [...realWaiters.keys()]) settleReal(name, new Error('the sim-kubelet stopped'));
      await informer.stop();
      await Promise.all([...initRuns.values()].map((i) => i.run.cancel()));
      const terminations = [...terminating.values()];
      for (const t of terminations) t.abort.abort();
      await Promise.all(terminations.map((t) => t.done));
      await chain;
      await storeChain;
      const held = [...sims.values(), ...reals.values(), ...stores.values()].map((r) => r.pod);
      await Promise.all([...sims.keys(), ...reals.keys(), ...stores.keys()].map((n) => stopSim(n)));
      // Pods still holding the finalizer are let go: nothing runs on their IPs any more.
      await Promise.all(
        held.map((name) => {
          const pod = informer.list().find((p) => p.metadata?.name === name);
          return pod ? releasePod(pod).catch(() => undefined) : Promise.resolve();
        }),
      );
      await client.close();
      rmSync(scratchRoot, { recursive: true, force: true });
      if (opts.nodeRoot === undefined) rmSync(nodeRoot, { recursive: true, force: true });
    },
  };
}
