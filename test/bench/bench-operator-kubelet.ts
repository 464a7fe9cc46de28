// Child process of bench-operator.ts: the sim-kubelet (one SGLang simulator per running
// pod, on the pod's IP), kept out of the benchmark's process so that process's memory
// is the operator's. Prints `ready` once its pod cache has synced; SIGTERM stops it.
import { startSimKubelet } from '../support/sim-kubelet.ts';

const kubeconfig = process.argv[2];
if (!kubeconfig) {
  process.stderr.write('usage: bench-operator-kubelet.ts <kubeconfig>\n');
  process.exit(2);
}
const kubelet = await startSimKubelet({
  kubeconfig,
  log: (msg) => void process.stderr.write(`${msg}\n`),
});
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void kubelet.stop().then(() => {
    process.stdout.write(`stopped (${kubelet.sims.size} simulators left)\n`);
    process.exit(0);
  });
});
