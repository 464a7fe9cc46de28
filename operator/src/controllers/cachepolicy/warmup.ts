// Which endpoints a CachePolicy's warm-up concerns, and the request that warms
// one. Pure.
//
// A warm-up document is sent as the system message of a chat completion
// (max 1 new token, temperature 0, the target's cache salt), so the runtime
// renders it with its own chat template exactly as it renders a user's chat
// request that starts with the same system message: the two share a token
// prefix, which the warm-up leaves in the runtime's radix cache. (A home-made
// rendering, or raw text through /generate, never matches a chat request.)
import type { DeploymentResource, Endpoint } from '#api';
import { buildBootstrapFields, type BootstrapFields } from '#sglang/bootstrap.ts';
import { buildEndpointUrl } from '#sglang/endpoint-url.ts';

/** A disaggregated target's partner: SGLang warms a prefill only through a real prefill/decode pair. */
export interface WarmupPair {
  decodePod: string;
  decodeUrl: string;
  bootstrapHost: string;
  bootstrapPort: number | undefined;
}

export interface WarmupTarget {
  /** The container instance: `<namespace>/<pod>#<restartCount>`; one warm-up at a time per key. */
  key: string;
  namespace: string;
  deployment: string;
  pod: string;
  restartCount: number;
  /** The pod's identity fingerprint (its decode partner's too): which runtime API key it takes. */
  fingerprint: string;
  /** The served model name the chat request names. */
  model: string;
  url: string;
  salt: string;
  pair?: WarmupPair;
  /** standalone or prefill: the role whose cache (and L3 tier) the documents land in. */
  role: 'standalone' | 'prefill';
  /** The role's HiCache L3 tier is reachable: the documents are delivered into it once (ADR 0042). */
  l3: boolean;
  /** The runtime's page size (spec.serving.pageSize): SGLang stores and loads whole pages. */
  pageSize: number;
  /** The rendering digest delivered into L3 for this role and identity: equal, nothing is prefilled. */
  deliveredRendering?: string;
  /** With l3: how the role's servers load from it, for the warm-up's warnings. */
  prefetch?: L3Prefetch;
}

/** SGLang 0.5.23's defaults (hicache_storage_prefetch_policy; the extra config's prefetch_threshold). */
export const SGLANG_PREFETCH_POLICY_DEFAULT = 'timeout';
export const SGLANG_PREFETCH_THRESHOLD_DEFAULT = 256;

export interface L3Prefetch {
  /** --hicache-storage-prefetch-policy. */
  policy: string;
  /** Tokens a request's unmatched part must reach before L3 is asked at all. */
  threshold: number;
}

function l3Fields(
  deployment: DeploymentResource | undefined,
  l3Roles: ReadonlySet<string>,
  role: string,
): Pick<WarmupTarget, 'l3' | 'prefetch'> {
  return l3Roles.has(role) ? { l3: true, prefetch: readL3Prefetch(deployment, role) } : { l3: false };
}

/** The role's prefetch settings from its HiCache spec (a `@file` extra config is not read: the default). */
export function readL3Prefetch(deployment: DeploymentResource | undefined, role: string): L3Prefetch {
  const d = deployment?.spec;
  const hicache =
    role === 'prefill' ? d?.disaggregation?.prefill.hicache : role === 'decode' ? undefined : d?.hicache;
  const storage = hicache?.storage;
  let threshold = SGLANG_PREFETCH_THRESHOLD_DEFAULT;
  const extra = storage?.extraConfig;
  if (extra && !extra.startsWith('@')) {
    try {
      const v = (JSON.parse(extra) as { prefetch_threshold?: unknown }).prefetch_threshold;
      if (typeof v === 'number' && Number.isInteger(v)) threshold = v;
    } catch {
      // SGLang refuses a malformed extra config at startup; nothing serves to warm.
    }
  }
  return { policy: storage?.prefetchPolicy ?? SGLANG_PREFETCH_POLICY_DEFAULT, threshold };
}

/** A serving prefilling endpoint: either a warm-up it can take now, or why it waits. */
export type WarmupCandidate =
  | { pod: string; restartCount: number; key: string; target: WarmupTarget }
  | { pod: string; restartCount: number; key: string; waiting: string };

const isServing = (e: Endpoint): boolean => e.ready && e.verified && e.ip !== '';
const urlOf = (e: Endpoint): string => buildEndpointUrl(e.ip, e.port);

export function buildInstanceKey(namespace: string, pod: string, restartCount: number): string {
  return `${namespace}/${pod}#${restartCount}`;
}

/**
 * The endpoints that take the policy's documents: verified and ready, of a
 * role that prefills (standalone or prefill; a decode server gets its KV from
 * prefill). A prefill endpoint is warmed through a serving decode endpoint of
 * its fingerprint: a disaggregated SGLang server refuses a request without a
 * bootstrap room, and one sent with the fake bootstrap host is never inserted
 * in its cache (sglang/bootstrap.ts). A prefill without a partner waits.
 */
export function computeWarmupCandidates(
  namespace: string,
  name: string,
  deployment: DeploymentResource | undefined,
  salt: string,
): WarmupCandidate[] {
  const endpoints = deployment?.status?.endpoints ?? [];
  const model = deployment?.spec.model.servedName ?? '';
  const l3Roles = new Set((deployment?.status?.l3 ?? []).filter((t) => t.reachable).map((t) => t.role));
  const pageSize = deployment?.spec.serving?.pageSize ?? 1;
  const out: WarmupCandidate[] = [];
  for (const e of endpoints) {
    if (!isServing(e) || e.role === 'decode') continue;
    const restartCount = e.restartCount ?? 0;
    const key = buildInstanceKey(namespace, e.pod, restartCount);
    const target: WarmupTarget = {
      key,
      namespace,
      deployment: name,
      pod: e.pod,
      restartCount,
      fingerprint: e.fingerprint ?? '',
      model,
      url: urlOf(e),
      salt,
      role: e.role === 'prefill' ? 'prefill' : 'standalone',
      pageSize,
      ...l3Fields(deployment, l3Roles, e.role),
    };
    if (e.role === 'prefill') {
      const decode = endpoints.find(
        (d) => d.role === 'decode' && isServing(d) && d.fingerprint === e.fingerprint,
      );
      if (!decode) {
        out.push({
          pod: e.pod,
          restartCount,
          key,
          waiting: 'waiting for a serving decode endpoint to pair with',
        });
        continue;
      }
      target.pair = {
        decodePod: decode.pod,
        decodeUrl: urlOf(decode),
        bootstrapHost: e.ip,
        bootstrapPort: e.bootstrapPort,
      };
    }
    out.push({ pod: e.pod, restartCount, key, target });
  }
  return out;
}

/** Pod and restart count of every endpoint the Deployment reports, serving or not. */
export function computeLiveInstances(deployment: DeploymentResource | undefined): Set<string> {
  return new Set((deployment?.status?.endpoints ?? []).map((e) => `${e.pod}#${e.restartCount ?? 0}`));
}

/**
 * One warm-up request: SGLang 0.5.23's ChatCompletionRequest (entrypoints/openai/protocol.py),
 * which takes `cache_salt` and, through PDRoutingFields, `bootstrap_host/port/room`.
 */
export interface WarmupChatRequest {
  model: string;
  messages: { role: 'system'; content: string }[];
  max_completion_tokens: number;
  temperature: number;
  stream: false;
  cache_salt: string;
  bootstrap_host?: string;
  bootstrap_port?: number;
  bootstrap_room?: number;
}

/** The chat request for one document; `room` only for a prefill/decode pair. */
export function buildWarmupRequest(
  target: WarmupTarget,
  document: string,
  room: number | undefined,
): WarmupChatRequest {
  // One generated token: the point is the prefill, which lands the prefix in the radix cache.
  const body: WarmupChatRequest = {
    model: target.model,
    messages: [{ role: 'system', content: document }],
    max_completion_tokens: 1,
    temperature: 0,
    stream: false,
    cache_salt: target.salt,
  };
  if (!target.pair || room === undefined) return body;
  const pd: BootstrapFields = buildBootstrapFields(
    target.pair.bootstrapHost,
    target.pair.bootstrapPort,
    room,
  );
  return { ...body, ...pd };
}
