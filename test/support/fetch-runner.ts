// The node agent for the model fetch Job's pods on KWOK nodes: what a kubelet would do with
// them, for real. For every Running pod labelled app.kubernetes.io/component=model-fetch it
// runs the pod's container command (the operator image's `node fetcher/src/main.ts`,
// here the repository's own file under this Node) as a process, with each volume mount mapped
// to a local directory: a PersistentVolumeClaim to its bound PersistentVolume's hostPath, a
// Secret to a directory of its items (mode 0400), an emptyDir to a fresh directory; the
// container's terminationMessagePath to a file; its env (values and the pod's IP) set and
// `$(VAR)` expanded, so the fetcher serves its progress on the pod IP as in a pod. When the process exits, the pod's status gets
// what a kubelet reports: phase Succeeded or Failed, the container terminated with its exit code
// and its termination message (the file, or with FallbackToLogsOnError and a failure, the log's
// last 2 KiB). KWOK's pod-complete stage leaves these pods alone (kwok-stages.ts), so a Job
// completes only when its fetcher did.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient } from '#kube/client.ts';
import { Informer } from '#kube/informer.ts';
import { Resources } from '#kube/resources.ts';
import {
  resolveContainerEnv,
  resolveVolumes,
  startContainerProcess,
  type ContainerPod,
  type ContainerProcess,
} from './container-process.ts';
import { RUNNER_LABEL } from './kwok-stages.ts';

type PodObject = ContainerPod;

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
  const procs = new Set<ContainerProcess>();
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
    const env = await resolveContainerEnv(client, pod, container, log);
    if (!env) {
      started.delete(name);
      return;
    }
    const proc = startContainerProcess({ label: `fetch ${name}`, container, volumes, env, dir: scratch });
    const run: FetchRun = {
      pod: name,
      argv: proc.argv,
      output: '',
      exitCode: undefined,
      endedAt: undefined,
      message: '',
    };
    runs.push(run);
    procs.add(proc);
    log(`fetch runner: pod ${name} runs ${proc.argv.join(' ')}`);
    const exit = await proc.exit;
    procs.delete(proc);
    run.endedAt = Date.now();
    run.output = exit.output;
    run.exitCode = exit.exitCode;
    run.message = exit.message;
    log(`fetch runner: pod ${name} exited ${run.exitCode}`);
    if (!stopped) await report(pod, run, exit.startedAt);
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
      await Promise.all([...procs].map((p) => p.stop()));
      await Promise.all([...pending]);
      await client.close();
      rmSync(scratchRoot, { recursive: true, force: true });
    },
  };
}
