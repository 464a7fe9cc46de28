// Test helpers around the cluster: kubectl (the one built with the control plane, so
// client and server versions match), eventually() for converging state, and
// per-test namespaces.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { findBinDir } from './binaries.ts';

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function kubectl(
  args: readonly string[],
  opts: { kubeconfig: string; input?: string; timeoutMs?: number },
): Promise<KubectlResult> {
  const bin = join(findBinDir(['kubectl']), 'kubectl');
  return new Promise((resolve, reject) => {
    const child = execFile(
      bin,
      [`--kubeconfig=${opts.kubeconfig}`, ...args],
      {
        timeout: opts.timeoutMs ?? 60_000,
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, KUBECONFIG: opts.kubeconfig },
      },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') {
          reject(new Error(`kubectl ${args.join(' ')}: ${err.message}`, { cause: err }));
          return;
        }
        resolve({ code: typeof err?.code === 'number' ? err.code : 0, stdout, stderr });
      },
    );
    child.stdin?.end(opts.input);
  });
}

// Like kubectl, but a non-zero exit is an error carrying stderr; returns stdout.
export async function kubectlOk(
  args: readonly string[],
  opts: { kubeconfig: string; input?: string },
): Promise<string> {
  const res = await kubectl(args, opts);
  if (res.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${res.code}: ${res.stderr.trim()}`);
  return res.stdout;
}

// Retries fn until it returns without throwing (use expect() inside), then returns its
// value; after timeoutMs rethrows the last failure. The only waiting tests should do.
export async function eventually<T>(
  fn: () => T | Promise<T>,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const intervalMs = opts.intervalMs ?? 200;
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() + intervalMs > deadline) {
        if (err instanceof Error) {
          err.message = `eventually: still failing after ${timeoutMs}ms (${attempt} attempts): ${err.message}`;
          throw err;
        }
        throw new Error(`eventually: still failing after ${timeoutMs}ms (${attempt} attempts)`, {
          cause: err,
        });
      }
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// A namespace with a unique name, deleted when the current test finishes (call it
// inside a test). Deletion does not wait: without kube-controller-manager (the
// integration plane) a namespace stays Terminating, which is harmless there.
export async function createTestNamespace(kubeconfig: string, prefix = 'test'): Promise<string> {
  const name = `${prefix}-${randomBytes(4).toString('hex')}`;
  const manifest = JSON.stringify({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name, labels: { 'cacheroute.dev/test': 'true' } },
  });
  await kubectlOk(['create', '-f', '-'], { kubeconfig, input: manifest });
  onTestFinished(async () => {
    await kubectlOk(['delete', 'namespace', name, '--wait=false', '--ignore-not-found'], { kubeconfig });
  });
  return name;
}

export interface EventView {
  reason: string;
  type: string;
  note?: string;
}

// The events.k8s.io Events about one object (by name) in a namespace.
export async function listEvents(kubeconfig: string, namespace: string, name: string): Promise<EventView[]> {
  const out = await kubectlOk(
    [
      'get',
      'events.events.k8s.io',
      '-n',
      namespace,
      '-o',
      'json',
      '--field-selector',
      `regarding.name=${name}`,
    ],
    { kubeconfig },
  );
  return (JSON.parse(out) as { items: EventView[] }).items;
}

/** Writes a cacheroute.dev object's status as the operator would (a merge patch on the status subresource). */
export async function patchCacherouteStatus(
  kubeconfig: string,
  ns: string,
  resource: string,
  name: string,
  status: unknown,
): Promise<void> {
  await kubectlOk(
    [
      'patch',
      `${resource}.cacheroute.dev`,
      name,
      '-n',
      ns,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status }),
    ],
    { kubeconfig },
  );
}
