// A real Prometheus (Debian's prometheus package, installed by
// hack/install-test-deps.sh) for the local system (local-system.ts): it scrapes
// the operator, the gateway and every SGLang pod as the chart's scrape objects
// do, under the same job names and, for SGLang pods, with the labels the
// relabelling of templates/monitoring-sglang.yaml gives, and loads the chart's
// alerts. Debian builds Prometheus without Kubernetes service discovery, so the
// SGLang pods come from a file (file_sd) this module rewrites from the API
// server every few seconds: Ready pods of the PodMonitor's selector, their
// `http` port. Used by `make run MONITORING=1` and make test-monitoring.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { kubectlOk } from '../../test/support/kubectl.ts';
import { replaceFile } from '../../test/support/replace-file.ts';
import { httpStatus, spawnManaged, stopManaged, waitUntilAnswering } from '../../test/support/processes.ts';
import { LOCAL_PORTS, ROOT, SYSTEM_NS } from '../local-system.ts';

export interface LocalPrometheus {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

export interface LocalPrometheusOptions {
  readonly dir: string;
  /** An admin kubeconfig: the SGLang pods are listed through it. */
  readonly kubeconfig: string;
  readonly log: (msg: string) => void;
  readonly port?: number;
  readonly scrapeInterval?: string;
}

/** The scrape configuration: what the chart's ServiceMonitors and PodMonitor make a Prometheus do. */
export function buildLocalPrometheusConfig(sglangTargetsFile: string, scrapeInterval: string): object {
  // The Prometheus Operator labels a target with its namespace: the alerts group by it.
  const local = (job: string, port: number): object => ({
    job_name: job,
    static_configs: [{ targets: [`127.0.0.1:${port}`], labels: { namespace: SYSTEM_NS } }],
  });
  return {
    global: { scrape_interval: scrapeInterval, evaluation_interval: scrapeInterval },
    rule_files: [join(ROOT, 'charts', 'cacheroute', 'monitoring', 'alerts.yaml')],
    scrape_configs: [
      local('cacheroute-operator', LOCAL_PORTS.operatorMetrics),
      local('cacheroute-gateway', LOCAL_PORTS.admin),
      {
        job_name: 'cacheroute-sglang',
        file_sd_configs: [{ files: [sglangTargetsFile], refresh_interval: scrapeInterval }],
      },
    ],
  };
}

interface PodList {
  items?: {
    metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
    spec?: { containers?: { ports?: { name?: string; containerPort?: number }[] }[] };
    status?: { podIP?: string; conditions?: { type?: string; status?: string }[] };
  }[];
}

/** The PodMonitor's selector. */
export const SGLANG_POD_SELECTOR =
  'app.kubernetes.io/name=sglang,app.kubernetes.io/managed-by=cacheroute-operator';

/** The labels templates/monitoring-sglang.yaml's relabelling gives (and namespace, pod, as the Prometheus Operator does). */
function labelSglangTarget(ns: string, name: string, labels: Record<string, string>): Record<string, string> {
  return {
    namespace: ns,
    pod: name,
    deployment: `${ns}/${labels['cacheroute.dev/deployment'] ?? ''}`,
    endpoint: `${ns}/${name}`,
    deployment_id: labels['cacheroute.dev/deployment-id'] ?? '',
    fingerprint: labels['cacheroute.dev/fingerprint'] ?? '',
    role: labels['cacheroute.dev/role'] ?? '',
  };
}

/**
 * file_sd target groups for the SGLang pods: Ready pods' `http` ports, labelled as
 * templates/monitoring-sglang.yaml relabels (namespace and pod as the Prometheus Operator adds them).
 */
export function buildSglangTargets(pods: PodList): object[] {
  const out: object[] = [];
  for (const p of pods.items ?? []) {
    const ready = p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    const port = p.spec?.containers?.flatMap((c) => c.ports ?? []).find((x) => x.name === 'http');
    const ip = p.status?.podIP;
    if (!ready || !port?.containerPort || !ip) continue;
    out.push({
      targets: [`${ip}:${port.containerPort}`],
      labels: labelSglangTarget(
        p.metadata?.namespace ?? '',
        p.metadata?.name ?? '',
        p.metadata?.labels ?? {},
      ),
    });
  }
  return out;
}

export async function startLocalPrometheus(opts: LocalPrometheusOptions): Promise<LocalPrometheus> {
  const port = opts.port ?? 9091;
  const interval = opts.scrapeInterval ?? '5s';
  const config = join(opts.dir, 'prometheus.yml');
  const targetsFile = join(opts.dir, 'sglang-targets.json');
  const syncTargets = async (): Promise<void> => {
    const pods = JSON.parse(
      await kubectlOk(['get', 'pods', '-A', '-l', SGLANG_POD_SELECTOR, '-o', 'json'], {
        kubeconfig: opts.kubeconfig,
      }),
    ) as PodList;
    // Written whole, then renamed: Prometheus never reads half a file.
    replaceFile(targetsFile, JSON.stringify(buildSglangTargets(pods)));
  };
  await syncTargets();
  let syncing = true;
  const loop = (async () => {
    while (syncing) {
      await new Promise((r) => setTimeout(r, 3_000));
      if (syncing) await syncTargets().catch((err: Error) => opts.log(`SGLang targets: ${err.message}`));
    }
  })();
  writeFileSync(config, stringify(buildLocalPrometheusConfig(targetsFile, interval)));
  const data = join(opts.dir, 'prometheus-data');
  mkdirSync(data, { recursive: true });
  const proc = spawnManaged(
    'prometheus',
    process.env['PROMETHEUS'] ?? 'prometheus',
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${data}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--web.enable-lifecycle',
    ],
    { logPath: join(opts.dir, 'prometheus.log') },
  );
  const url = `http://127.0.0.1:${port}`;
  opts.log(`starting Prometheus on ${url} (log: ${join(opts.dir, 'prometheus.log')})`);
  const stop = async (): Promise<void> => {
    syncing = false;
    await loop;
    await stopManaged(proc);
  };
  try {
    await waitUntilAnswering(proc, async () => (await httpStatus(`${url}/-/ready`)) === 200, {
      what: '/-/ready',
      timeoutMs: 60_000,
      intervalMs: 250,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, port, stop };
}
