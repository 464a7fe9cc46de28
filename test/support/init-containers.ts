// A pod's init containers, run as a kubelet runs them (for sim-kubelet.ts): in order, each a
// local process (container-process.ts), each reported in the pod's status as it goes
// (initContainerStatuses: running, then terminated with its exit code and termination message).
// A failed one is retried, as under restartPolicy Always, after a backoff that doubles from 10 s
// to at most 40 s (reported meanwhile as waiting in CrashLoopBackOff, the failure in lastState);
// the containers after it and the pod's runtime wait. Until all have completed the pod is not
// Initialized, Ready nor ContainersReady and its containers wait in PodInitializing: KWOK's
// pod-ready stage has already called the pod Ready with every init container Completed (it
// runs nothing), and this replaces that. Done, the pod is what KWOK makes of a pod without init
// containers: Initialized, Ready, its containers running.
import { join } from 'node:path';
import type {
  V1Container,
  V1ContainerState,
  V1ContainerStatus,
  V1PodCondition,
} from '@kubernetes/client-node';
import type { KubeClient } from '#kube/client.ts';
import { Resources } from '#kube/resources.ts';
import {
  resolveContainerEnv,
  resolveVolumes,
  startContainerProcess,
  type ContainerExit,
  type ContainerPod,
  type ContainerProcess,
} from './container-process.ts';

export interface InitBackoff {
  /** The wait before the first restart of a failed init container; doubled at each restart. */
  readonly initialMs: number;
  readonly maxMs: number;
}

/** A kubelet's crash-loop backoff. */
export const KUBELET_BACKOFF: InitBackoff = { initialMs: 10_000, maxMs: 40_000 };

/** The wait before restart number `restarts + 1`. */
export function computeBackoffMs(restarts: number, backoff: InitBackoff): number {
  return Math.min(backoff.initialMs * 2 ** restarts, backoff.maxMs);
}

// While a volume or a Secret key is not there yet, as a kubelet retries a container it cannot configure.
const UNRESOLVED_RETRY_MS = 1000;
const MANAGED_CONDITIONS = ['Initialized', 'Ready', 'ContainersReady'];

/** The pod's conditions with Initialized, Ready and ContainersReady set as an init step leaves them. */
export function buildInitConditions(
  current: readonly V1PodCondition[],
  pendingNames: readonly string[],
  now: string,
): V1PodCondition[] {
  const done = pendingNames.length === 0;
  const reason = done ? undefined : 'ContainersNotInitialized';
  const status = done ? 'True' : 'False';
  const ours = MANAGED_CONDITIONS.map((type): V1PodCondition => {
    const before = current.find((c) => c.type === type);
    return {
      type,
      status,
      // A condition's transition time moves only when its status does.
      lastTransitionTime:
        (before?.status === status ? before.lastTransitionTime : undefined) ?? new Date(now),
      ...(reason
        ? {
            reason,
            message:
              type === 'Initialized'
                ? `containers with incomplete status: [${pendingNames.join(' ')}]`
                : `containers with unready status: [${pendingNames.join(' ')}]`,
          }
        : {}),
    };
  });
  return [...current.filter((c) => !MANAGED_CONDITIONS.includes(c.type)), ...ours];
}

/** The main containers' statuses: waiting in PodInitializing, or running once the pod is initialized. */
function buildMainStatuses(containers: readonly V1Container[], initialized: boolean, now: string): object[] {
  return containers.map((c) => ({
    name: c.name,
    image: c.image ?? '',
    imageID: '',
    restartCount: 0,
    ready: initialized,
    started: initialized,
    state: initialized ? { running: { startedAt: now } } : { waiting: { reason: 'PodInitializing' } },
  }));
}

function buildTerminated(exit: ContainerExit): V1ContainerState {
  return {
    terminated: {
      exitCode: exit.exitCode,
      reason: exit.exitCode === 0 ? 'Completed' : 'Error',
      ...(exit.message ? { message: exit.message } : {}),
      startedAt: new Date(exit.startedAt),
      finishedAt: new Date(exit.finishedAt),
    },
  };
}

export interface InitRun {
  /** True once every init container completed; false when cancelled first. */
  readonly done: Promise<boolean>;
  /** Stops the running init container and any wait; resolves once the run has ended. */
  cancel(): Promise<void>;
}

export function startInitContainers(opts: {
  client: KubeClient;
  pod: ContainerPod;
  /** The pod's own directory (its Secrets, emptyDirs, logs). */
  dir: string;
  /** Where every node's hostPath trees are. */
  nodeRoot: string;
  backoff: InitBackoff;
  /** The pod as the informer has it now (its current conditions). */
  latest: () => ContainerPod | undefined;
  log: (msg: string) => void;
}): InitRun {
  const { client, pod, log } = opts;
  const namespace = pod.metadata?.namespace ?? '';
  const name = pod.metadata?.name ?? '';
  const inits = pod.spec?.initContainers ?? [];
  const statuses: V1ContainerStatus[] = inits.map((c) => ({
    name: c.name,
    image: c.image ?? '',
    imageID: '',
    ready: false,
    restartCount: 0,
    started: false,
    state: { waiting: { reason: 'PodInitializing' } },
  }));
  let cancelled = false;
  let current: ContainerProcess | undefined;
  let wake: (() => void) | undefined;

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  async function report(pending: readonly string[]): Promise<void> {
    if (cancelled) return;
    const now = new Date().toISOString();
    const conditions = buildInitConditions(opts.latest()?.status?.conditions ?? [], pending, now);
    await client.patch(
      Resources.pods,
      namespace,
      name,
      {
        status: {
          conditions,
          initContainerStatuses: statuses,
          containerStatuses: buildMainStatuses(pod.spec?.containers ?? [], pending.length === 0, now),
        },
      },
      'merge',
      { subresource: 'status' },
    );
  }

  /** The pod's volumes and the container's env, once they resolve; undefined when cancelled first. */
  async function prepare(
    container: V1Container,
  ): Promise<{ volumes: Map<string, string>; env: Map<string, string> } | undefined> {
    while (!cancelled) {
      const volumes = await resolveVolumes(client, pod, opts.dir, opts.nodeRoot);
      const env = volumes && (await resolveContainerEnv(client, pod, container, log));
      if (volumes && env) return { volumes, env };
      await sleep(UNRESOLVED_RETRY_MS);
    }
    return undefined;
  }

  /** One init container until it completes; false when cancelled first. */
  async function runToCompletion(i: number, container: V1Container, pending: string[]): Promise<boolean> {
    const status = statuses[i] as V1ContainerStatus;
    for (;;) {
      const ready = await prepare(container);
      if (!ready || cancelled) return false;
      current = startContainerProcess({
        label: `init ${name}/${container.name}`,
        container,
        ...ready,
        dir: join(opts.dir, `${container.name}-${status.restartCount}`),
      });
      log(`pod ${name}: init container ${container.name} runs ${current.argv.join(' ')}`);
      status.state = { running: { startedAt: new Date() } };
      await report(pending);
      const exit = await current.exit;
      current = undefined;
      if (cancelled) return false;
      status.state = buildTerminated(exit);
      status.ready = exit.exitCode === 0;
      log(`pod ${name}: init container ${container.name} exited ${exit.exitCode}`);
      if (exit.exitCode === 0) return true;
      await report(pending);
      const waitMs = computeBackoffMs(status.restartCount, opts.backoff);
      status.lastState = status.state;
      status.state = {
        waiting: {
          reason: 'CrashLoopBackOff',
          message: `back-off ${waitMs / 1000}s restarting failed container=${container.name} pod=${name}`,
        },
      };
      await report(pending);
      await sleep(waitMs);
      status.restartCount += 1;
    }
  }

  async function run(): Promise<boolean> {
    const pending = inits.map((c) => c.name);
    await report(pending);
    for (const [i, container] of inits.entries()) {
      if (!(await runToCompletion(i, container, pending))) return false;
      pending.shift();
      await report(pending);
    }
    return !cancelled;
  }

  const done = run().catch((err: unknown) => {
    if (!cancelled) log(`pod ${name}: init containers: ${(err as Error).message}`);
    return false;
  });
  return {
    done,
    async cancel() {
      cancelled = true;
      wake?.();
      await current?.stop();
      await done;
    },
  };
}
