// Where hack/build-controlplane.sh puts the control-plane binaries, and a clear error
// when they are not there yet. Same defaults as the script (K8S_VERSION, cache dir).
import { accessSync, constants, existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

export const CONTROL_PLANE_BINARIES = ['etcd', 'kube-apiserver', 'kubectl'] as const;
export const FULL_CONTROL_PLANE_BINARIES = ['kube-controller-manager', 'kube-scheduler', 'kwok'] as const;

export function findBinDir(required: readonly string[] = CONTROL_PLANE_BINARIES): string {
  const env = process.env;
  const cache =
    env['CACHEROUTE_CACHE'] ?? join(env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'cacheroute');
  const binDir = env['CACHEROUTE_BIN'] ?? join(cache, `k8s-${env['K8S_VERSION'] ?? 'v1.35.4'}`, 'bin');
  const missing = required.filter((name) => !isExecutable(join(binDir, name)));
  if (missing.length > 0) {
    throw new Error(
      `control-plane binaries missing in ${binDir}: ${missing.join(', ')}. ` +
        'Run `make controlplane` (builds them once into the cache), or set CACHEROUTE_BIN to a directory that has them.',
    );
  }
  return binDir;
}

// The KWOK stage definitions the build script writes next to bin/.
export function findKwokStages(binDir: string): string {
  const path = join(dirname(binDir), 'kwok-stages.yaml');
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`make controlplane\``);
  return path;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
