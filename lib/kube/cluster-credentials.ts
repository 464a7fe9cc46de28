// How the operator and the gateway reach and authenticate to the API server.
// In a pod (how both run in production) the service account's files are read
// here; a kubeconfig file is read by client-node's KubeConfig, imported only
// then: its module graph carries the whole generated Kubernetes API, about
// 19 MB of the gateway's heap, which made its major collections, and so its
// latency tail, longer (ADR 0012).

import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { RequestOptions } from 'node:https';
import { isIPv6 } from 'node:net';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

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

  // The token is read on every call: the kubelet rotates projected tokens (hourly by default).
  // The CA goes into KubeClient's connection pool once, when it is made; it is read with the token
  // only because applyToHTTPSOptions is how KubeClient asks for both.
  async applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    const [ca, token] = await Promise.all([
      readFile(join(this.#dir, 'ca.crt')),
      readFile(join(this.#dir, 'token'), 'utf8'),
    ]);
    opts.ca = ca;
    const bearer = token.trim();
    if (bearer) opts.headers = { ...opts.headers, Authorization: `Bearer ${bearer}` };
  }
}

export interface CredentialSources {
  readonly env?: NodeJS.ProcessEnv;
  readonly home?: string;
  readonly serviceAccountDir?: string;
}

/**
 * A kubeconfig from `path`, else the files $KUBECONFIG lists (merged as kubectl merges them),
 * else ~/.kube/config; else the pod's service account. Errors say what to pass.
 */
export async function loadClusterCredentials(
  path: string | undefined,
  sources: CredentialSources = {},
): Promise<ClusterCredentials> {
  const env = sources.env ?? process.env;
  const listed = (env['KUBECONFIG'] ?? '').split(delimiter).filter((f) => f.length > 0);
  const homeConfig = join(sources.home ?? homedir(), '.kube', 'config');
  const files = path ? [path] : listed.length > 0 ? listed : existsSync(homeConfig) ? [homeConfig] : [];
  if (files.length > 0) return loadKubeConfigFiles(files);
  const dir = sources.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  if (!existsSync(join(dir, 'token')))
    throw new Error(
      'no kubeconfig: pass --kubeconfig <file>, set $KUBECONFIG, or run in a pod with a service account',
    );
  try {
    return InClusterCredentials.fromEnvironment(env, dir);
  } catch (err) {
    throw new Error(`cannot use the pod's service account: ${(err as Error).message}`, { cause: err });
  }
}

async function loadKubeConfigFiles(files: readonly string[]): Promise<ClusterCredentials> {
  try {
    const { KubeConfig } = await import('@kubernetes/client-node');
    const kc = new KubeConfig();
    const [first = '', ...rest] = files;
    kc.loadFromFile(first);
    for (const file of rest) {
      const more = new KubeConfig();
      more.loadFromFile(file);
      // As kubectl: the first file that names a current context wins.
      kc.mergeConfig(more, Boolean(kc.getCurrentContext()));
    }
    if (!kc.getCurrentCluster())
      throw new Error(`${files.join(delimiter)} has no current context with a cluster`);
    return kc;
  } catch (err) {
    throw new Error(`cannot load the kubeconfig: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
}
