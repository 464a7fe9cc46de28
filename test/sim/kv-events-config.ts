// --kv-events-config and --load-publish-endpoint as SGLang 0.5.23 reads them
// (disaggregation/kv_events.py: KVEventsConfig, ZmqEventPublisher,
// resolve_load_pub_range; runtime_context.describe_kv_events_publisher):
//
// - the config is JSON validated by a pydantic model: publisher ("null" |
//   "zmq"), endpoint (tcp://*:5557), bind (null: bind a wildcard host,
//   "::", 0.0.0.0, ipc:// or inproc://, connect otherwise), replay_endpoint,
//   buffer_steps (10,000 batches kept for replay), hwm, max_queue_size,
//   topic (""), format ("default" | "dynamo"); unknown keys are ignored;
// - DP rank r publishes on the endpoint's port + r (and replays on the
//   replay port + r);
// - /server_info's kv_events is null unless the publisher is active on a
//   routable tcp:// endpoint; then {publisher, endpoint_host,
//   endpoint_port_base, topic, block_size (page size x DCP), dp_size,
//   [load_endpoint_port_base, load_topic "load"], [replay_endpoint_port_base]};
// - the load range: unset or "off" is off; "auto" packs dp_size ports after
//   the KV range (after the replay range when they would overlap) and needs
//   a wildcard-host KV endpoint; an explicit tcp://*:PORT sets the base and
//   must not overlap the KV or replay ranges.
//
// Pure; zod at the JSON boundary.

import { isIPv6 } from 'node:net';
import { z } from 'zod';

export const KvEventsConfig = z.object({
  publisher: z.string().default('null'),
  endpoint: z.string().default('tcp://*:5557'),
  bind: z.boolean().nullable().default(null),
  replay_endpoint: z.string().nullable().default(null),
  buffer_steps: z.number().int().default(10_000),
  hwm: z.number().int().default(100_000),
  max_queue_size: z.number().int().default(100_000),
  topic: z.string().default(''),
  format: z.enum(['default', 'dynamo']).default('default'),
});
export type KvEventsConfig = z.infer<typeof KvEventsConfig>;

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string };

export function parseKvEventsConfig(raw: string): ParseResult<KvEventsConfig> {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (e) {
    return { ok: false, error: `--kv-events-config is not JSON: ${(e as Error).message}` };
  }
  const parsed = KvEventsConfig.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      ok: false,
      error: `--kv-events-config: ${issue?.path.join('.') ?? ''}: ${issue?.message ?? ''}`,
    };
  }
  return { ok: true, value: parsed.data };
}

export interface TcpAddress {
  readonly host: string;
  readonly port: number;
  readonly isIpv6: boolean;
}

/** NetworkAddress.parse of a tcp:// endpoint's host:port; null when it is not one. */
export function parseTcpEndpoint(endpoint: string | null): TcpAddress | null {
  if (!endpoint?.startsWith('tcp://')) return null;
  const addr = endpoint.slice('tcp://'.length);
  let host: string;
  let portText: string;
  if (addr.startsWith('[')) {
    const close = addr.indexOf(']');
    if (close < 0 || !addr.startsWith(':', close + 1)) return null;
    host = addr.slice(1, close);
    if (!isIPv6(host)) return null;
    portText = addr.slice(close + 2);
  } else {
    const colon = addr.lastIndexOf(':');
    if (colon <= 0) return null;
    host = addr.slice(0, colon);
    if (isIPv6(host)) return null; // bare IPv6 is ambiguous
    portText = addr.slice(colon + 1);
  }
  if (!/^\d+$/.test(portText)) return null;
  const port = Number(portText);
  if (!(port > 0 && port <= 65535)) return null;
  return { host, port, isIpv6: isIPv6(host) };
}

const WILDCARD_HOSTS = new Set(['*', '0.0.0.0', '::']);

function isBindableTcp(a: TcpAddress | null): a is TcpAddress {
  return a !== null && WILDCARD_HOSTS.has(a.host);
}

/** ZmqEventPublisher.offset_endpoint_port: rank r uses port + r. */
export function offsetEndpointPort(endpoint: string, rank: number): string {
  if (rank === 0) return endpoint;
  if (endpoint.includes('inproc')) return `${endpoint}_dp${rank}`;
  const colon = endpoint.lastIndexOf(':');
  return `${endpoint.slice(0, colon)}:${Number(endpoint.slice(colon + 1)) + rank}`;
}

/** Whether the PUB socket binds (true) or connects (false). */
export function shouldBind(cfg: KvEventsConfig, endpoint: string): boolean {
  if (cfg.bind !== null) return cfg.bind;
  return (
    endpoint.includes('*') ||
    endpoint.includes('::') ||
    endpoint.includes('0.0.0.0') ||
    endpoint.startsWith('ipc://') ||
    endpoint.startsWith('inproc://')
  );
}

export interface LoadRange {
  readonly host: string;
  readonly base: number;
}

type RangeResult = { range: LoadRange | null; reason: string | null };
const declined = (reason: string): RangeResult => ({ range: null, reason });

/** resolve_load_pub_range: the load PUB range, or why there is none (reason null: simply off). */
export function resolveLoadRange(
  cfg: KvEventsConfig | null,
  dpSize: number,
  loadPublishEndpoint: string | null,
): RangeResult {
  const mode = (loadPublishEndpoint ?? '').trim();
  if (dpSize < 1 || mode === '' || mode.toLowerCase() === 'off') return { range: null, reason: null };
  const found =
    mode.toLowerCase() === 'auto' ? packAfterKvRange(cfg, dpSize) : placeExplicitly(cfg, dpSize, mode);
  if (!found.range) return found;
  if (found.range.base + dpSize - 1 > 65535) {
    return declined(`load port range from ${found.range.base} would run past the u16 ceiling`);
  }
  return found;
}

const overlaps = (a: number, b: number, dpSize: number): boolean => a < b + dpSize && b < a + dpSize;

// `auto`: dp_size ports after the KV range, or after the replay range when they would overlap.
function packAfterKvRange(cfg: KvEventsConfig | null, dpSize: number): RangeResult {
  const kvEndpoint = cfg?.endpoint ?? null;
  const kv = parseTcpEndpoint(kvEndpoint);
  if (!isBindableTcp(kv)) {
    const why = kvEndpoint === null ? '--kv-events-config is not set' : `'${kvEndpoint}' is not one`;
    return declined(
      `--load-publish-endpoint=auto needs a bindable wildcard-host tcp:// --kv-events-config endpoint to pack after; ${why}`,
    );
  }
  const replayPort = parseTcpEndpoint(cfg?.replay_endpoint ?? null)?.port ?? null;
  let base = kv.port + dpSize;
  if (replayPort !== null && overlaps(base, replayPort, dpSize)) base = replayPort + dpSize;
  return { range: { host: kv.host, base }, reason: null };
}

function placeExplicitly(cfg: KvEventsConfig | null, dpSize: number, mode: string): RangeResult {
  const kvPort = parseTcpEndpoint(cfg?.endpoint ?? null)?.port ?? null;
  if (kvPort === null) {
    return declined(`--load-publish-endpoint='${mode}' needs a routable tcp:// --kv-events-config endpoint`);
  }
  const explicit = parseTcpEndpoint(mode);
  if (!isBindableTcp(explicit)) {
    return declined(`--load-publish-endpoint='${mode}' is not a bindable tcp:// address`);
  }
  const replayPort = parseTcpEndpoint(cfg?.replay_endpoint ?? null)?.port ?? null;
  for (const port of [kvPort, replayPort]) {
    if (port !== null && overlaps(explicit.port, port, dpSize)) {
      return declined(
        `--load-publish-endpoint range [${explicit.port}, ${explicit.port + dpSize}) overlaps the kv-events range [${port}, ${port + dpSize})`,
      );
    }
  }
  return { range: { host: explicit.host, base: explicit.port }, reason: null };
}

export interface KvEventsDescriptor {
  readonly publisher: string;
  readonly endpoint_host: string;
  readonly endpoint_port_base: number;
  readonly topic: string;
  readonly block_size: number;
  readonly dp_size: number;
  readonly load_endpoint_port_base?: number;
  readonly load_topic?: string;
  readonly replay_endpoint_port_base?: number;
}

export const LOAD_TOPIC = 'load';

/** describe_kv_events_publisher: /server_info's kv_events (null when not published). */
export function describeKvEvents(
  cfg: KvEventsConfig | null,
  opts: { readonly pageSize: number; readonly dpSize: number; readonly loadPublishEndpoint: string | null },
): KvEventsDescriptor | null {
  if (!cfg || opts.pageSize <= 0 || cfg.publisher === 'null' || cfg.endpoint === '') return null;
  const kv = parseTcpEndpoint(cfg.endpoint);
  if (!kv) return null;
  const { range } = resolveLoadRange(cfg, opts.dpSize, opts.loadPublishEndpoint);
  const replay = parseTcpEndpoint(cfg.replay_endpoint);
  return {
    publisher: cfg.publisher,
    endpoint_host: kv.isIpv6 ? `[${kv.host}]` : kv.host,
    endpoint_port_base: kv.port,
    topic: cfg.topic,
    block_size: opts.pageSize,
    dp_size: opts.dpSize,
    ...(range ? { load_endpoint_port_base: range.base, load_topic: LOAD_TOPIC } : {}),
    ...(replay ? { replay_endpoint_port_base: replay.port } : {}),
  };
}
