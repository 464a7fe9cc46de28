// How the operator and the gateway reach and authenticate to the API server.
// In a pod (how both run in production) the service account's files are read
// here; a kubeconfig file is read by client-node's KubeConfig, imported only
// then: its module graph carries the whole generated Kubernetes API (about
// 40 MB of heap), which made every major collection of the gateway, and so its
// latency tail, longer (ADR 0012).

import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { RequestOptions } from 'node:https';
import { isIPv6 } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** What KubeClient needs; client-node's KubeConfig is one. */
export interface ClusterCredentials {
  getCurrentCluster(): { readonly server: string } | null;
  /** TLS material and the Authorization header, as of now (tokens rotate). */
  applyToHTTPSOptions(opts: RequestOptions): Promise<void>;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** A pod's service account: the API server from the environment, the CA and a token from the mounted files. */
export class InClusterCredentials implements ClusterCredentials {
  readonly server: string;
  readonly #dir: string;

  constructor(server: string, dir: string = SERVICE_ACCOUNT_DIR) {
    this.server = server;
    this.#dir = dir;
  }

  /** Reads KUBERNETES_SERVICE_HOST and _PORT, as every in-cluster client does. */
  static fromEnvironment(
    env: NodeJS.ProcessEnv = process.env,
    dir: string = SERVICE_ACCOUNT_DIR,
  ): InClusterCredentials {
    const host = env['KUBERNETES_SERVICE_HOST'];
    const port = env['KUBERNETES_SERVICE_PORT'];
    if (!host || !port)
      throw new Error(
        'KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: outside a pod, pass --kubeconfig <file> or set $KUBECONFIG',
      );
    return new InClusterCredentials(`https://${isIPv6(host) ? `[${host}]` : host}:${port}`, dir);
  }

  getCurrentCluster(): { readonly server: string } {
    return { server: this.server };
  }

  // The token file is read on every call: the kubelet rotates projected tokens (hourly by default).
  async applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    const [ca, token] = await Promise.all([
      readFile(join(this.#dir, 'ca.crt')),
      readFile(join(this.#dir, 'token'), 'utf8'),
    ]);
    opts.ca = ca;
    opts.headers = { ...opts.headers, Authorization: `Bearer ${token.trim()}` };
  }
}

export interface CredentialSources {
  readonly env?: NodeJS.ProcessEnv;
  readonly home?: string;
  readonly serviceAccountDir?: string;
}

/**
 * A kubeconfig from `path`, else $KUBECONFIG (read from process.env, as client-node reads it), else
 * ~/.kube/config; else the pod's service account. Errors say what to pass.
 */
export async function loadClusterCredentials(
  path: string | undefined,
  sources: CredentialSources = {},
): Promise<ClusterCredentials> {
  const env = sources.env ?? process.env;
  const homeConfig = join(sources.home ?? homedir(), '.kube', 'config');
  const dir = sources.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  try {
    if (path || env['KUBECONFIG'] || existsSync(homeConfig)) {
      const { KubeConfig } = await import('@kubernetes/client-node');
      const kc = new KubeConfig();
      if (path) kc.loadFromFile(path);
      else if (env['KUBECONFIG'])
        kc.loadFromDefault(); // merges every file the variable lists
      else kc.loadFromFile(homeConfig);
      if (!kc.getCurrentCluster()) throw new Error('it has no current context with a cluster');
      return kc;
    }
    if (existsSync(join(dir, 'token'))) return InClusterCredentials.fromEnvironment(env, dir);
  } catch (err) {
    throw new Error(`cannot load the kubeconfig: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
  throw new Error(
    'no kubeconfig: pass --kubeconfig <file>, set $KUBECONFIG, or run in a pod with a service account',
  );
}
