// A full test control plane (etcd, kube-apiserver, controller-manager, scheduler,
// KWOK with fake GPU nodes) in the foreground, for humans: prints how to reach it
// and tears everything down on Ctrl-C.
//
//   node hack/controlplane-up.ts [--gpu-nodes=N]
//
// The plane lives in a private network namespace (hack/in-netns.sh); run outside
// one, this re-runs itself inside one.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { startControlPlane } from '../test/support/controlplane.ts';

const log = (msg: string): void => void process.stderr.write(`[controlplane-up] ${msg}\n`);

function parseGpuNodes(argv: readonly string[]): number {
  const flag = argv.find((a) => a.startsWith('--gpu-nodes='));
  const n = flag === undefined ? 2 : Number(flag.slice('--gpu-nodes='.length));
  if (!Number.isInteger(n) || n < 0) throw new Error(`--gpu-nodes wants a whole number, got ${flag}`);
  return n;
}

async function runInsideNetns(): Promise<number> {
  const script = fileURLToPath(import.meta.url);
  const inNetns = join(dirname(script), 'in-netns.sh');
  const child = spawn('bash', [inNetns, process.execPath, script, ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  // Ctrl-C reaches the child through the terminal; wait for it to clean up.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => child.kill('SIGTERM'));
  process.on('SIGHUP', () => child.kill('SIGTERM'));
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 130))),
  );
}

async function main(): Promise<void> {
  if (process.env['CACHEROUTE_NETNS'] !== '1') {
    process.exitCode = await runInsideNetns();
    return;
  }
  const cp = await startControlPlane({ full: true, gpuNodes: parseGpuNodes(process.argv.slice(2)), log });
  const kubectl = join(cp.binDir, 'kubectl');
  const nsenter = `nsenter --net=/proc/${process.env['CACHEROUTE_NETNS_PID'] ?? '<pid>'}/ns/net --`;
  process.stdout.write(
    [
      `kube-apiserver ${cp.version} at ${cp.server} (started in ${cp.startupMs}ms); logs in ${cp.dir}`,
      '',
      `export KUBECONFIG=${cp.kubeconfig}`,
      '',
      'It listens inside a private network namespace: run clients there, e.g. from another shell:',
      `  ${nsenter} ${kubectl} --kubeconfig=${cp.kubeconfig} get nodes`,
      '',
      'Ctrl-C stops it.',
      '',
    ].join('\n'),
  );
  await new Promise<void>((resolve) => {
    // Stays registered so the harness's own signal hook does not re-raise the signal
    // before the orderly stop below has finished.
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => resolve());
  });
  log('stopping');
  await cp.stop();
  log('stopped');
}

await main();
