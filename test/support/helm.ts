// helm, the one built with the control plane (hack/build-controlplane.sh), for chart
// tests: `helm template` into parsed objects, and a plain runner for everything else.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { findBinDir } from './binaries.ts';
import { createUserKubeconfig, type ControlPlaneInfo } from './controlplane.ts';
import { kubectlOk } from './kubectl.ts';
import { REPO_ROOT } from './samples.ts';

export const CHART_DIR = join(REPO_ROOT, 'charts', 'cacheroute');

// A source-built helm defaults to Kubernetes v1.20 for capabilities; render for ours.
export const KUBE_VERSION = process.env['K8S_VERSION'] ?? 'v1.35.4';

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

export async function helm(args: readonly string[], opts: { timeoutMs?: number } = {}): Promise<HelmResult> {
  const bin = join(findBinDir(['helm']), 'helm');
  return new Promise((resolve, reject) => {
    execFile(
      bin,
      args,
      { timeout: opts.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') {
          reject(new Error(`helm ${args.join(' ')}: ${err.message}`, { cause: err }));
          return;
        }
        resolve({ code: typeof err?.code === 'number' ? err.code : 0, stdout, stderr });
      },
    );
  });
}

// `helm template` of the chart; values as --set pairs (typed: true, 3). Throws with helm's stderr.
export async function helmTemplate(opts: {
  release: string;
  namespace: string;
  values?: Record<string, string>;
  chartDir?: string;
}): Promise<RenderedObject[]> {
  const sets = Object.entries(opts.values ?? {}).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
  const args = [
    'template',
    opts.release,
    opts.chartDir ?? CHART_DIR,
    '--namespace',
    opts.namespace,
    '--kube-version',
    KUBE_VERSION,
    ...sets,
  ];
  const res = await helm(args);
  if (res.code !== 0) throw new Error(`helm ${args.join(' ')} exited ${res.code}: ${res.stderr.trim()}`);
  return parseAllDocuments(res.stdout)
    .map((d) => d.toJS() as RenderedObject | null)
    .filter((o): o is RenderedObject => o !== null && typeof o === 'object');
}

const IDENTITY_KINDS = ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'];

/**
 * The chart's RBAC for one component (operator or gateway), applied as the chart
 * renders it, and a kubeconfig that authenticates as its ServiceAccount (a client
 * certificate for the ServiceAccount's user name): the rights are exactly the
 * chart's, nothing more.
 */
export async function createChartIdentity(
  cp: Pick<ControlPlaneInfo, 'dir' | 'server' | 'kubeconfig'>,
  opts: {
    release: string;
    namespace: string;
    component: 'operator' | 'gateway';
    /** Chart values (`--set`), e.g. gateway.mode picker: its RBAC follows them. */
    values?: Record<string, string>;
  },
): Promise<string> {
  const objects = (
    await helmTemplate({
      release: opts.release,
      namespace: opts.namespace,
      ...(opts.values ? { values: opts.values } : {}),
    })
  ).filter(
    (o) =>
      IDENTITY_KINDS.includes(o.kind) &&
      o.metadata.labels?.['app.kubernetes.io/component'] === opts.component,
  );
  const sa = objects.find((o) => o.kind === 'ServiceAccount')?.metadata.name;
  if (!sa) throw new Error(`the chart renders no ServiceAccount for ${opts.component}`);
  await kubectlOk(['apply', '-f', '-'], {
    kubeconfig: cp.kubeconfig,
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
  });
  return createUserKubeconfig(cp, {
    user: `system:serviceaccount:${opts.namespace}:${sa}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${opts.namespace}`],
  });
}
