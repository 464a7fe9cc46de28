// `make bench-operator`: the operator against a full control plane with KWOK GPU nodes
// and an SGLang simulator on every running pod's IP. N Deployments (1 replica, 1 GPU)
// are created at once and reconciled to Ready (every endpoint verified by its runtime).
// Figures, printed last as one JSON line:
//   convergeMs          first create → all N Ready and verified (polled every second)
//   baselineMs          the bound, measured first in the same run (bench-operator-baseline.ts):
//                       the objects the operator makes, applied straight with its concurrency,
//                       until every runtime answers; convergeVsBaseline = convergeMs / baselineMs
//   requestsPerReconcile  the operator's API requests / its reconciles, up to convergence
//   resyncWrites        the operator's writes from steady state through the next resync
//                       (--sync-period-s: every object replayed, every key reconciled
//                       again) until idle (goal: 0); Lease renewals are counted apart
//   operator memory     operatorProcessRssMB: RSS of the operator as its own process
//                       (`node operator/src/main.ts`, as in its container) once it has
//                       reconciled all N on the converged cluster (it also reports the
//                       writes of that fresh start: restartWrites, goal 0), and
//                       operatorProcessIdleRssMB the same before any Deployment exists. In this
//                       process, which holds the operator beside a small driver (the
//                       sim-kubelet and its simulators run in a child process, the
//                       control plane in its own), operatorHeapMB is the V8 heap after a
//                       full GC minus the same just before the operator started, and
//                       operatorRetainedHeapMB the heap freed by stopping it (caches,
//                       queues, metrics). In-process RSS deltas are noise: V8 keeps pages.
// Runs inside hack/in-netns.sh. Flags: --deployments 200 --nodes 30 --sync-period-s 90
// --timeout-s 1500 (everything is bounded by the timeout); --nodes-per-replica 2: the
// multi-node case, each replica a LeaderWorkerSet group on the real LWS controller.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { KubeConfig } from '@kubernetes/client-node';
import type { DeploymentStatus } from '#api';
import { startOperator } from '../../operator/src/operator.ts';
import type { Operator } from '../../operator/src/operator.ts';
import { KubeClient, isWrite } from '#kube/client.ts';
import { createLogger } from '#kube/logger.ts';
import { mapLimited } from '../../operator/src/manager/map-limited.ts';
import type { KubeObject } from '#kube/objects.ts';
import { countRequests, createRequestCounter } from '../../operator/src/manager/request-counter.ts';
import { Resources } from '#kube/resources.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { measureControlPlaneBaseline } from './bench-operator-baseline.ts';
import { startControlPlane } from '../support/controlplane.ts';
import type { ControlPlane } from '../support/controlplane.ts';
import { kubectlOk } from '../support/kubectl.ts';
import { spawnManaged, stopManaged } from '../support/processes.ts';
import type { ManagedProcess } from '../support/processes.ts';
import { REPO_ROOT } from '../support/samples.ts';
import type { Manifest } from '../support/samples.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const NS = 'bench';
const BASELINE_NS = 'bench-baseline';
/** The Deployment controller's workers (its default), and the baseline driver's. */
const CONCURRENCY = 4;
const MB = 1024 * 1024;

interface Flags {
  deployments: number;
  nodes: number;
  /** Above 1, each replica is a LeaderWorkerSet group of this many one-GPU pods (the real LWS controller runs). */
  nodesPerReplica: number;
  syncPeriodS: number;
  timeoutS: number;
}

function parseFlags(argv: readonly string[]): Flags {
  const flags: Flags = { deployments: 200, nodes: 30, nodesPerReplica: 1, syncPeriodS: 90, timeoutS: 1500 };
  const names: Record<string, keyof Flags> = {
    '--deployments': 'deployments',
    '--nodes': 'nodes',
    '--nodes-per-replica': 'nodesPerReplica',
    '--sync-period-s': 'syncPeriodS',
    '--timeout-s': 'timeoutS',
  };
  for (let i = 0; i < argv.length; i += 2) {
    const key = names[argv[i] ?? ''];
    const value = Number(argv[i + 1]);
    if (!key || !Number.isFinite(value) || value <= 0)
      throw new Error(`usage: bench-operator.ts ${Object.keys(names).join(' N ')} N`);
    flags[key] = value;
  }
  return flags;
}

const log = (msg: string): void => void process.stderr.write(`[bench-operator] ${msg}\n`);

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

interface Memory {
  rssMB: number;
  heapMB: number;
}
function measureMemory(): Memory {
  gc();
  gc();
  const m = process.memoryUsage();
  return { rssMB: m.rss / MB, heapMB: m.heapUsed / MB };
}

function rssOfPid(pid: number): number | undefined {
  try {
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) / 1024;
  } catch {
    return undefined;
  }
}

// Polls check until it returns true; throws at the deadline.
async function waitUntil(
  what: string,
  deadline: number,
  check: () => boolean | Promise<boolean>,
  everyMs = 500,
) {
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

async function reconcileCount(op: Operator, controller?: string): Promise<number> {
  const m = await op.manager.metrics.reconcileTotal.get();
  return m.values
    .filter((v) => !controller || v.labels.controller === controller)
    .reduce((n, v) => n + v.value, 0);
}

// Created, Ready, and every endpoint verified against what its runtime reports.
function isVerifiedReady(s: DeploymentStatus | undefined): boolean {
  const ready = s?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  const eps = s?.endpoints ?? [];
  return (
    ready &&
    s?.verifiedReplicas === 1 &&
    eps.length === 1 &&
    eps.every((e) => e.verified && e.reported?.servedModelName === 'llama-8b')
  );
}

// Sums a Prometheus counter's samples whose labels pass `keep`.
function sumMetric(text: string, name: string, keep: (labels: string) => boolean = () => true): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm')))
    if (keep(m[1] ?? '')) sum += Number(m[2]);
  return sum;
}

// The operator as its own process (`node operator/src/main.ts`, as in a container) on
// the converged cluster: its RSS once it has reconciled every Deployment, and the writes
// a fresh start makes (goal: none but the Lease).
async function measureOperatorProcess(cp: ControlPlane, deployments: number, deadline: number) {
  // The private network namespace has nothing else on this port.
  const port = 18081;
  const proc = spawnManaged(
    'operator',
    process.execPath,
    [
      join(REPO_ROOT, 'operator/src/main.ts'),
      `--kubeconfig=${cp.kubeconfig}`,
      '--metrics-host=127.0.0.1',
      `--metrics-port=${port}`,
      `--lease-namespace=${NS}`,
      '--log-level=warn',
      // As the in-process operator: cache health off. Its writes follow traffic, not reconciles;
      // this measures what reconciling costs.
      '--cache-health-period-seconds=0',
    ],
    { logPath: join(cp.dir, 'operator.log') },
  );
  try {
    let text = '';
    let last = -1;
    await waitUntil(
      'the operator process to reconcile every Deployment',
      deadline,
      async () => {
        if (!proc.isRunning()) throw new Error(`the operator exited: see ${proc.logPath}`);
        text = await fetch(`http://127.0.0.1:${port}/metrics`)
          .then((r) => r.text())
          .catch(() => '');
        const n = sumMetric(text, 'controller_runtime_reconcile_total', (l) =>
          l.includes('controller="deployment"'),
        );
        const idle = text !== '' && n >= deployments && n === last;
        last = n;
        return idle;
      },
      2000,
    );
    const status = readFileSync(`/proc/${proc.pid}/status`, 'utf8');
    const kb = (field: string): number =>
      Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
    return {
      rssMB: kb('VmRSS') / 1024,
      peakRssMB: kb('VmHWM') / 1024,
      reconciles: last,
      writes: sumMetric(
        text,
        'cacheroute_api_writes_total',
        (l) => !l.includes('leases.coordination.k8s.io'),
      ),
    };
  } finally {
    await stopManaged(proc, 10_000);
  }
}

async function run(flags: Flags, cp: ControlPlane, stack: (() => Promise<void>)[]) {
  const deadline = Date.now() + flags.timeoutS * 1000;
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });

  const kubelet: ManagedProcess = spawnManaged(
    'sim-kubelet',
    process.execPath,
    [join(HERE, 'bench-operator-kubelet.ts'), cp.kubeconfig],
    { logPath: join(cp.dir, 'sim-kubelet.log') },
  );
  stack.push(() => stopManaged(kubelet, 10_000));
  await waitUntil('the sim-kubelet', deadline, () => {
    if (!kubelet.isRunning()) throw new Error(`sim-kubelet exited: see ${kubelet.logPath}`);
    return /^ready$/m.test(readFileSync(kubelet.logPath, 'utf8'));
  });

  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  const driver = await KubeClient.fromKubeConfig(kc, { userAgent: 'bench-driver' });
  stack.push(() => driver.close());
  const names = Array.from({ length: flags.deployments }, (_, i) => `bench-${String(i).padStart(3, '0')}`);
  const n = flags.nodesPerReplica;
  // Multi-node: tensor parallelism across the group's pods, one GPU each.
  const parallelism = n > 1 ? { parallelism: { tensor: n, nodes: n } } : {};
  const manifests = names.map((name) =>
    buildDeploymentManifest({
      name,
      replicas: 1,
      gpus: 1,
      spec: { deploymentId: `${name}-r1`, ...parallelism },
    }),
  );

  // The bound, in the same run: the same objects applied straight, in a namespace of their own
  // that is gone (its pods' GPUs free again) before the operator starts.
  await kubectlOk(['create', 'namespace', BASELINE_NS], { kubeconfig: cp.kubeconfig });
  const baselineMs = await measureControlPlaneBaseline({
    driver,
    namespace: BASELINE_NS,
    manifests,
    concurrency: CONCURRENCY,
    deadline,
    log,
  });
  log(`baseline: every runtime answering in ${Math.round(baselineMs)} ms; deleting its namespace`);
  await kubectlOk(['delete', 'namespace', BASELINE_NS, '--wait=true', `--timeout=${flags.timeoutS}s`], {
    kubeconfig: cp.kubeconfig,
  });

  // The same process with nothing to reconcile: what any operator costs before objects do.
  const idleProcess = await measureOperatorProcess(cp, 0, deadline);
  const before = measureMemory();
  const holder: { op?: Operator } = {};
  stack.push(async () => holder.op?.stop());
  const m = await measureOperator({ flags, cp, driver, names, manifests, deadline, holder });
  const simRssMB = rssOfPid(kubelet.pid);
  // Only the figures outlive the operator now: what the GC frees was its.
  const after = measureMemory();
  const ownProcess = await measureOperatorProcess(cp, names.length, deadline);
  log(`operator process: ${JSON.stringify(ownProcess)}`);
  const round = (n: number, d = 1): number => Math.round(n * 10 ** d) / 10 ** d;
  return {
    bench: 'operator',
    deployments: names.length,
    nodes: flags.nodes,
    nodesPerReplica: flags.nodesPerReplica,
    gpusPerNode: 8,
    concurrency: CONCURRENCY,
    convergeMs: Math.round(m.convergeMs),
    baselineMs: Math.round(baselineMs),
    convergeVsBaseline: round(m.convergeMs / baselineMs, 2),
    createMs: Math.round(m.createdMs),
    requestsToConverge: m.atConverge.total,
    reconcilesToConverge: m.reconcilesAtConverge,
    requestsPerReconcile: round(m.atConverge.total / m.reconcilesAtConverge, 2),
    writesToConverge: m.atConverge.writes,
    writesPerDeployment: round(m.atConverge.writes / names.length, 2),
    requestsByVerb: m.atConverge.byVerb,
    failedRequestsByCode: m.failedByCode,
    syncPeriodS: flags.syncPeriodS,
    resyncReconciles: m.resyncReconciles,
    resyncRequests: m.resyncRequests,
    resyncWrites: m.resyncWrites.length,
    resyncWriteKinds: [...new Set(m.resyncWrites)],
    resyncLeaseRenewals: m.leaseRenewals,
    reconcileResults: m.reconcileResults,
    operatorHeapMB: round(m.during.heapMB - before.heapMB),
    operatorRetainedHeapMB: round(m.during.heapMB - after.heapMB),
    operatorProcessIdleRssMB: round(idleProcess.rssMB),
    operatorProcessRssMB: round(ownProcess.rssMB),
    operatorProcessPeakRssMB: round(ownProcess.peakRssMB),
    restartReconciles: ownProcess.reconciles,
    restartWrites: ownProcess.writes,
    simKubeletRssMB: simRssMB === undefined ? null : round(simRssMB),
    node: process.version,
  };
}

interface Phase {
  flags: Flags;
  cp: ControlPlane;
  driver: KubeClient;
  names: readonly string[];
  manifests: readonly Manifest[];
  deadline: number;
  // The running operator, for cleanup on failure; cleared once stopped.
  holder: { op?: Operator };
}

// Starts the operator, converges, waits out a resync, measures memory, stops it.
async function measureOperator(ctx: Phase) {
  const { flags, cp, driver, names, manifests, deadline, holder } = ctx;
  const counter = createRequestCounter();
  // Informers' resync timers start with the operator: the k-th resync of each fires
  // between k and 1.1·k sync periods after this (controller-runtime's jitter).
  const startedAt = Date.now();
  const operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({ level: 'warn', fields: { component: 'operator' } }),
    leaderElection: { namespace: NS, name: 'cacheroute-operator' },
    http: false,
    syncPeriodMs: flags.syncPeriodS * 1000,
  });
  holder.op = operator;
  operator.client.observe(counter.observe);
  await waitUntil(
    'leadership',
    deadline,
    () => operator.manager.isLeader() && operator.manager.hasSynced(),
    50,
  );

  const t0 = performance.now();
  await mapLimited(manifests, 16, async (m) => {
    await driver.create(Resources.sglangDeployments, {
      ...(m as KubeObject),
      metadata: { ...m.metadata, namespace: NS },
    });
  });
  const createdMs = performance.now() - t0;
  log(`created ${names.length} Deployments in ${Math.round(createdMs)} ms`);
  let ready = 0;
  let lastLog = 0;
  await waitUntil(
    'all Deployments Ready and verified',
    deadline,
    async () => {
      const list = await driver.list<KubeObject & { status?: DeploymentStatus }>(
        Resources.sglangDeployments,
        {
          namespace: NS,
        },
      );
      ready = list.items.filter((d) => isVerifiedReady(d.status)).length;
      if (performance.now() - lastLog > 15_000) {
        lastLog = performance.now();
        log(`${ready}/${names.length} Ready after ${Math.round((lastLog - t0) / 1000)} s`);
      }
      return ready === names.length;
    },
    1000,
  );
  const convergeMs = performance.now() - t0;
  const atConverge = counter.snapshot();
  // Failed requests by status code (409: a write from a stale cache, retried).
  const failedByCode: Record<string, number> = {};
  for (const r of counter.requests())
    if (r.code >= 300 || r.code === 0) failedByCode[r.code] = (failedByCode[r.code] ?? 0) + 1;
  const reconcilesAtConverge = await reconcileCount(operator);
  log(
    `all Ready in ${Math.round(convergeMs)} ms; ${atConverge.total} requests, ${reconcilesAtConverge} reconciles`,
  );

  // Steady state: once the queues are idle, wait through the next resync (every object
  // replayed, every key reconciled again) and until idle again; count what it wrote.
  const waitIdle = async (): Promise<void> => {
    let last = -1;
    await waitUntil(
      'idle queues',
      deadline,
      async () => {
        const now = await reconcileCount(operator);
        const idle = now === last;
        last = now;
        return idle;
      },
      3000,
    );
  };
  await waitIdle();
  const resyncFrom = counter.requests().length;
  const r0 = await reconcileCount(operator, 'deployment');
  const periodMs = flags.syncPeriodS * 1000;
  const k = Math.floor((Date.now() - startedAt) / periodMs) + 1;
  const resyncDone = startedAt + k * periodMs * 1.1 + 1000;
  log(`steady state; waiting ${Math.round((resyncDone - Date.now()) / 1000)} s for resync #${k}`);
  await waitUntil('resync', deadline, () => Date.now() >= resyncDone, 1000);
  await waitIdle();
  await operator.manager.events.flush();
  const resync = countRequests(counter.requests().slice(resyncFrom));
  const resyncReconciles = (await reconcileCount(operator, 'deployment')) - r0;
  if (resyncReconciles < names.length)
    throw new Error(`the resync reconciled ${resyncReconciles} of ${names.length} Deployments`);
  // Lease renewals are the election's heartbeat, not reconcile writes: counted apart.
  const windowWrites = counter.requests().slice(resyncFrom).filter(isWrite);
  const leaseRenewals = windowWrites.filter((r) => r.resource === 'leases.coordination.k8s.io').length;
  const resyncWrites = windowWrites
    .filter((r) => r.resource !== 'leases.coordination.k8s.io')
    .map((r) => `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''}`);
  log(`requests to converge by verb and resource: ${JSON.stringify(atConverge.byVerbResource)}`);
  const reconcileResults = (await operator.manager.metrics.reconcileTotal.get()).values.map(
    (v) => `${v.labels.controller}:${v.labels.result}=${v.value}`,
  );

  const during = measureMemory();
  await operator.stop();
  delete holder.op;
  return {
    convergeMs,
    createdMs,
    atConverge,
    reconcilesAtConverge,
    resyncReconciles,
    resyncRequests: resync.total,
    resyncWrites,
    leaseRenewals,
    reconcileResults,
    failedByCode,
    during,
  };
}

async function main(): Promise<number> {
  const flags = parseFlags(process.argv.slice(2));
  const stack: (() => Promise<void>)[] = [];
  let cp: ControlPlane | undefined;
  try {
    cp = await startControlPlane({
      full: true,
      gpuNodes: flags.nodes,
      leaderWorkerSet: flags.nodesPerReplica > 1,
      log,
    });
    const figures = await run(flags, cp, stack);
    process.stdout.write(`${JSON.stringify(figures)}\n`);
    return 0;
  } catch (err) {
    log(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.stdout.write(`${JSON.stringify({ bench: 'operator', error: String(err) })}\n`);
    return 1;
  } finally {
    for (const stop of stack.reverse()) await stop().catch((e: unknown) => log(`cleanup: ${String(e)}`));
    await cp?.stop();
  }
}

process.exitCode = await main();
