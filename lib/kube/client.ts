// A small Kubernetes REST client over undici, authenticated from ClusterCredentials (a
// kubeconfig or the pod's service account: cluster-credentials.ts). We own
// the HTTP layer (rather than the generated client) so that one client serves every
// resource type, watches stream line by line under our own reconnect policy, server-side
// apply is a first-class verb, and every request passes through observers (metrics, the
// request counter tests and the benchmark read).
import type { RequestOptions } from 'node:https';
import { Agent, request } from 'undici';
import type { Dispatcher } from 'undici';
import type { ClusterCredentials } from './cluster-credentials.ts';
import type { KubeList, KubeObject, KubeStatus, WatchEvent } from './objects.ts';
import { resourceLabel, resourcePath } from './resources.ts';
import type { ResourceType } from './resources.ts';

export const ApiVerb = {
  get: 'get',
  list: 'list',
  watch: 'watch',
  create: 'create',
  update: 'update',
  patch: 'patch',
  apply: 'apply',
  delete: 'delete',
} as const;
export type ApiVerb = (typeof ApiVerb)[keyof typeof ApiVerb];

const WRITE_VERBS: ReadonlySet<ApiVerb> = new Set(['create', 'update', 'patch', 'apply', 'delete']);

export interface RequestInfo {
  verb: ApiVerb;
  resource: string; // `deployments.apps`, `pods`, ...
  subresource?: string;
  namespace?: string;
  code: number; // HTTP status; 0 when the request failed without one
  durationMs: number;
  dryRun: boolean;
}

// A write persists something: a dry-run is a read in disguise.
export function isWrite(info: Pick<RequestInfo, 'verb' | 'dryRun'>): boolean {
  return !info.dryRun && WRITE_VERBS.has(info.verb);
}

export type RequestObserver = (info: RequestInfo) => void;

export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly code: number;
  readonly reason: string;
  readonly status: KubeStatus | undefined;
  constructor(message: string, code: number, status: KubeStatus | undefined, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.reason = status?.reason ?? '';
    this.status = status;
  }
}

export const isNotFound = (err: unknown): boolean => err instanceof ApiError && err.code === 404;
export const isConflict = (err: unknown): boolean => err instanceof ApiError && err.code === 409;
export const isAlreadyExists = (err: unknown): boolean =>
  err instanceof ApiError && err.code === 409 && err.reason === 'AlreadyExists';
export const isGone = (err: unknown): boolean =>
  err instanceof ApiError && (err.code === 410 || err.reason === 'Expired' || err.reason === 'Gone');

export type PatchType = 'merge' | 'json' | 'strategic';
const PATCH_CONTENT_TYPES: Record<PatchType | 'apply', string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml', // JSON is valid YAML
};

export interface ListOptions {
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  limit?: number | undefined;
  continue?: string | undefined;
  resourceVersion?: string | undefined;
}

export interface WatchOptions extends ListOptions {
  allowWatchBookmarks?: boolean;
  timeoutSeconds?: number;
  signal?: AbortSignal;
}

export interface ApplyOptions {
  fieldManager: string;
  force?: boolean;
  dryRun?: boolean;
  subresource?: string;
}

export interface KubeClientOptions {
  // Extra observers; more can be added with observe().
  observers?: RequestObserver[];
  // Per-request timeout for non-watch requests.
  timeoutMs?: number;
  userAgent?: string;
}

interface RawRequest {
  method: Dispatcher.HttpMethod;
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  info: Omit<RequestInfo, 'code' | 'durationMs'>;
  signal?: AbortSignal;
}

export class KubeClient {
  readonly server: string;
  private readonly credentials: ClusterCredentials;
  private readonly dispatcher: Agent;
  private readonly observers: RequestObserver[];
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private headersCache: { at: number; headers: Record<string, string> } | undefined;

  private constructor(kc: ClusterCredentials, tls: RequestOptions, opts: KubeClientOptions) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = cluster.server.replace(/\/+$/, '');
    this.credentials = kc;
    this.observers = [...(opts.observers ?? [])];
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.userAgent = opts.userAgent ?? 'cacheroute-operator';
    const connect: Record<string, unknown> = {};
    for (const k of ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const) {
      const v = (tls as Record<string, unknown>)[k];
      if (v !== undefined) connect[k] = v;
    }
    this.dispatcher = new Agent({ connect, keepAliveTimeout: 30_000 });
  }

  /** `kc`: a client-node KubeConfig or InClusterCredentials. */
  static async fromKubeConfig(kc: ClusterCredentials, opts: KubeClientOptions = {}): Promise<KubeClient> {
    const tls: RequestOptions = {};
    await kc.applyToHTTPSOptions(tls);
    return new KubeClient(kc, tls, opts);
  }

  observe(observer: RequestObserver): () => void {
    this.observers.push(observer);
    return () => {
      const i = this.observers.indexOf(observer);
      if (i >= 0) this.observers.splice(i, 1);
    };
  }

  async close(): Promise<void> {
    await this.dispatcher.destroy();
  }

  async get<T extends KubeObject>(
    rt: ResourceType,
    namespace: string | undefined,
    name: string,
    opts: { subresource?: string } = {},
  ): Promise<T | undefined> {
    try {
      return await this.json<T>({
        method: 'GET',
        path: resourcePath(rt, { namespace, name, subresource: opts.subresource }),
        info: info('get', rt, namespace, opts.subresource),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list<T extends KubeObject>(rt: ResourceType, opts: ListOptions = {}): Promise<KubeList<T>> {
    return this.json<KubeList<T>>({
      method: 'GET',
      path: resourcePath(rt, { namespace: opts.namespace }),
      query: listQuery(opts),
      info: info('list', rt, opts.namespace),
    });
  }

  // Streams watch events until the server closes the stream (resolves) or it fails
  // (throws). ERROR events are yielded, not thrown: the caller decides what 410 means.
  async *watch<T extends KubeObject>(rt: ResourceType, opts: WatchOptions): AsyncGenerator<WatchEvent<T>> {
    const started = performance.now();
    const base = info('watch', rt, opts.namespace);
    let code = 0;
    try {
      const res = await this.send({
        method: 'GET',
        path: resourcePath(rt, { namespace: opts.namespace }),
        query: {
          ...listQuery(opts),
          watch: true,
          allowWatchBookmarks: opts.allowWatchBookmarks,
          timeoutSeconds: opts.timeoutSeconds,
        },
        info: base,
        ...(opts.signal ? { signal: opts.signal } : {}),
        // A silent connection past the server's own timeout is a dead one.
        bodyTimeoutMs: ((opts.timeoutSeconds ?? 600) + 60) * 1000,
      });
      code = res.statusCode;
      if (code < 200 || code >= 300) throw await toApiError('GET', base, res);
      let buffered = '';
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        buffered += chunk.toString('utf8');
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (line) yield JSON.parse(line) as WatchEvent<T>;
        }
      }
    } finally {
      this.notify({ ...base, code, durationMs: performance.now() - started });
    }
  }

  async create<T extends KubeObject>(rt: ResourceType, obj: T, opts: { dryRun?: boolean } = {}): Promise<T> {
    const namespace = obj.metadata?.namespace;
    return this.json<T>({
      method: 'POST',
      path: resourcePath(rt, { namespace }),
      query: { dryRun: opts.dryRun ? 'All' : undefined },
      body: obj,
      info: info('create', rt, namespace, undefined, opts.dryRun),
    });
  }

  async replace<T extends KubeObject>(
    rt: ResourceType,
    obj: T,
    opts: { subresource?: string } = {},
  ): Promise<T> {
    const namespace = obj.metadata?.namespace;
    return this.json<T>({
      method: 'PUT',
      path: resourcePath(rt, { namespace, name: obj.metadata?.name ?? '', subresource: opts.subresource }),
      body: obj,
      info: info('update', rt, namespace, opts.subresource),
    });
  }

  async patch<T extends KubeObject>(
    rt: ResourceType,
    namespace: string | undefined,
    name: string,
    body: unknown,
    type: PatchType,
    opts: { subresource?: string; fieldManager?: string } = {},
  ): Promise<T> {
    return this.json<T>({
      method: 'PATCH',
      path: resourcePath(rt, { namespace, name, subresource: opts.subresource }),
      query: { fieldManager: opts.fieldManager },
      body,
      contentType: PATCH_CONTENT_TYPES[type],
      info: info('patch', rt, namespace, opts.subresource),
    });
  }

  // Server-side apply: obj names itself (apiVersion, kind, metadata.name/namespace).
  async apply<T extends KubeObject>(rt: ResourceType, obj: T, opts: ApplyOptions): Promise<T> {
    const namespace = obj.metadata?.namespace;
    return this.json<T>({
      method: 'PATCH',
      path: resourcePath(rt, { namespace, name: obj.metadata?.name ?? '', subresource: opts.subresource }),
      query: { fieldManager: opts.fieldManager, force: opts.force, dryRun: opts.dryRun ? 'All' : undefined },
      body: obj,
      contentType: PATCH_CONTENT_TYPES.apply,
      info: info('apply', rt, namespace, opts.subresource, opts.dryRun),
    });
  }

  async delete(
    rt: ResourceType,
    namespace: string | undefined,
    name: string,
    opts: {
      propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
      uid?: string;
      /** 0: at once (a kubelet's last word on a pod whose containers stopped). */
      gracePeriodSeconds?: number;
    } = {},
  ): Promise<boolean> {
    try {
      await this.json<unknown>({
        method: 'DELETE',
        path: resourcePath(rt, { namespace, name }),
        body: {
          kind: 'DeleteOptions',
          apiVersion: 'v1',
          ...(opts.propagationPolicy ? { propagationPolicy: opts.propagationPolicy } : {}),
          ...(opts.uid ? { preconditions: { uid: opts.uid } } : {}),
          ...(opts.gracePeriodSeconds !== undefined ? { gracePeriodSeconds: opts.gracePeriodSeconds } : {}),
        },
        info: info('delete', rt, namespace),
      });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  private async json<T>(req: RawRequest): Promise<T> {
    const started = performance.now();
    let code = 0;
    try {
      const res = await this.send(req);
      code = res.statusCode;
      if (code < 200 || code >= 300) throw await toApiError(req.method, req.info, res);
      return (await res.body.json()) as T;
    } finally {
      this.notify({ ...req.info, code, durationMs: performance.now() - started });
    }
  }

  private async send(req: RawRequest & { bodyTimeoutMs?: number }): Promise<Dispatcher.ResponseData> {
    const url = new URL(this.server + req.path);
    for (const [k, v] of Object.entries(req.query ?? {}))
      if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': this.userAgent,
      ...(await this.authHeaders()),
    };
    let payload: string | undefined;
    if (req.body !== undefined) {
      payload = JSON.stringify(req.body);
      headers['content-type'] = req.contentType ?? 'application/json';
    }
    const isWatch = req.info.verb === 'watch';
    try {
      return await request(url, {
        method: req.method,
        headers,
        body: payload ?? null,
        dispatcher: this.dispatcher,
        signal: req.signal ?? null,
        headersTimeout: this.timeoutMs,
        bodyTimeout: isWatch ? (req.bodyTimeoutMs ?? 0) : this.timeoutMs,
      });
    } catch (err) {
      throw new Error(`${req.method} ${url.pathname}: ${(err as Error).message}`, { cause: err });
    }
  }

  // Bearer tokens (exec plugins, projected service-account tokens) rotate; the credentials
  // refresh them (client-node's authenticators, or the token file read again), so we ask
  // again every 30 s.
  private async authHeaders(): Promise<Record<string, string>> {
    const now = Date.now();
    if (this.headersCache && now - this.headersCache.at < 30_000) return this.headersCache.headers;
    const opts: RequestOptions = {};
    await this.credentials.applyToHTTPSOptions(opts);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) if (v !== undefined) headers[k] = String(v);
    this.headersCache = { at: now, headers };
    return headers;
  }

  private notify(i: RequestInfo): void {
    for (const o of this.observers) {
      try {
        o(i);
      } catch {
        // An observer never breaks a request.
      }
    }
  }
}

function info(
  verb: ApiVerb,
  rt: ResourceType,
  namespace?: string,
  subresource?: string,
  dryRun?: boolean,
): Omit<RequestInfo, 'code' | 'durationMs'> {
  return {
    verb,
    resource: resourceLabel(rt),
    dryRun: dryRun === true,
    ...(namespace ? { namespace } : {}),
    ...(subresource ? { subresource } : {}),
  };
}

function listQuery(opts: ListOptions): Record<string, string | number | undefined> {
  return {
    labelSelector: opts.labelSelector,
    fieldSelector: opts.fieldSelector,
    limit: opts.limit,
    continue: opts.continue,
    resourceVersion: opts.resourceVersion,
  };
}

async function toApiError(
  method: string,
  i: Omit<RequestInfo, 'code' | 'durationMs'>,
  res: Dispatcher.ResponseData,
): Promise<ApiError> {
  const text = await res.body.text().catch(() => '');
  let status: KubeStatus | undefined;
  try {
    status = JSON.parse(text) as KubeStatus;
  } catch {
    status = undefined;
  }
  const what = `${method} ${i.resource}${i.subresource ? `/${i.subresource}` : ''}`;
  const msg = status?.message ?? text.slice(0, 300);
  return new ApiError(`${what}: HTTP ${res.statusCode}: ${msg}`, res.statusCode, status);
}
