// `make run`: the whole system, locally, without Docker. Outside the private
// network namespace this process keeps host ports that reach into it (so
// kubectl on the host works as printed) and starts itself again inside
// hack/in-netns.sh, where the control plane runs with its fake GPU nodes.
//
//   node hack/run-local.ts [--api-port=16443] [--gpu-nodes=2]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { startControlPlane } from '../test/support/controlplane.ts';
import { kubectlOk } from '../test/support/kubectl.ts';
import { forwardTcpToUnix, forwardUnixToTcp } from './local-bridge.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const log = (msg: string): void => void process.stderr.write(`[run] ${msg}\n`);

function flag(name: string, fallback: number): number {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
  const n = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} wants a whole number, got ${raw}`);
  return n;
}

function waitForSignal(): Promise<void> {
  return new Promise((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => resolve());
  });
}

async function outside(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-run-'));
  const apiPort = flag('api-port', 16443);
  const bridge = await forwardTcpToUnix(apiPort, join(dir, 'apiserver.sock')).catch((err: Error) => {
    throw new Error(`cannot listen on 127.0.0.1:${apiPort} (${err.message}); pass --api-port=<free port>`);
  });
  const child = spawn(
    'bash',
    [
      join(ROOT, 'hack/in-netns.sh'),
      process.execPath,
      fileURLToPath(import.meta.url),
      `--inner=${dir}`,
      `--api-port=${apiPort}`,
      ...process.argv.slice(2),
    ],
    {
      stdio: 'inherit',
    },
  );
  // Ctrl-C reaches the child through the terminal; SIGTERM is passed on.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => child.kill('SIGTERM'));
  const code = await new Promise<number>((resolve) =>
    child.on('exit', (c, s) => resolve(c ?? (s ? 130 : 1))),
  );
  bridge.close();
  rmSync(dir, { recursive: true, force: true });
  process.exitCode = code;
}

/** The admin kubeconfig, pointed at the host end of the bridge instead of the namespace address. */
function writeHostKubeconfig(source: string, target: string, apiPort: number): void {
  const config = parse(readFileSync(source, 'utf8')) as { clusters: { cluster: { server: string } }[] };
  for (const c of config.clusters) c.cluster.server = `https://127.0.0.1:${apiPort}`;
  writeFileSync(target, stringify(config), { mode: 0o600 });
}

async function inside(dir: string): Promise<void> {
  const apiPort = flag('api-port', 16443);
  const cp = await startControlPlane({ full: true, gpuNodes: flag('gpu-nodes', 2), log });
  const server = new URL(cp.server);
  const bridge = await forwardUnixToTcp(join(dir, 'apiserver.sock'), server.hostname, Number(server.port));
  const kubeconfig = join(dir, 'kubeconfig');
  writeHostKubeconfig(cp.kubeconfig, kubeconfig, apiPort);

  const k = { kubeconfig: cp.kubeconfig };
  await kubectlOk(['apply', '--server-side', '-f', join(ROOT, 'crds')], k);
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(ROOT, 'crds')], k);
  await kubectlOk(['apply', '-f', join(ROOT, 'examples')], k);
  const kubectl = join(cp.binDir, 'kubectl');
  process.stdout.write(
    [
      '',
      `cacheroute is up: kube-apiserver ${cp.version}, ${flag('gpu-nodes', 2)} fake GPU nodes, CRDs and examples/ applied.`,
      '',
      `export KUBECONFIG=${kubeconfig}`,
      `${kubectl} get nodes`,
      `${kubectl} get cacheroute`,
      `${kubectl} explain sgd.spec`,
      '',
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
  await waitForSignal();
  log('stopping');
  bridge.close();
  await cp.stop();
}

const inner = process.argv.find((a) => a.startsWith('--inner='))?.slice('--inner='.length);
if (inner !== undefined) await inside(inner);
else await outside();
