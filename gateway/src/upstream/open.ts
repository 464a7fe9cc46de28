// The gateway's side of every runtime connection: one undici pool for all
// endpoints, its timeouts and limits, and the runtimes' API keys.

import { Agent } from 'undici';
import { SGLANG_KEEP_ALIVE_TIMEOUT_MS } from '#sglang/http-server.ts';
import type { RuntimeKeyDirectory } from '../discovery/runtime-keys.ts';
import type { RoutingTable } from '../routing/table.ts';
import type { SendOptions } from './answer.ts';
import { RuntimeAuthorization } from './runtime-auth.ts';

export interface UpstreamOptions {
  /** Time to response headers (non-streaming: the whole generation). */
  readonly headersTimeoutMs?: number;
  /** Longest silence between body chunks. */
  readonly bodyTimeoutMs?: number;
  readonly connectionsPerEndpoint?: number;
  readonly keepAliveTimeoutMs?: number;
  /** Endpoints tried per request (1 = no retry). */
  readonly maxAttempts?: number;
  /** Largest body sent to a runtime: re-encoding can grow one (invalid UTF-8 threefold, `1e20` fivefold). */
  readonly maxBodyBytes?: number;
  /** Largest buffered (non-streamed) answer taken from a runtime; a larger one is cut (502). */
  readonly maxAnswerBytes?: number;
}

export interface Upstream {
  readonly settings: Required<UpstreamOptions>;
  readonly send: SendOptions;
  close(): Promise<void>;
}

export function openUpstream(
  options: UpstreamOptions | undefined,
  table: RoutingTable,
  runtimeKeys: RuntimeKeyDirectory | undefined,
): Upstream {
  const settings: Required<UpstreamOptions> = {
    headersTimeoutMs: 600_000,
    bodyTimeoutMs: 300_000,
    connectionsPerEndpoint: 256,
    // Idle upstream connections close before the runtime closes them: no request races SGLang's close.
    keepAliveTimeoutMs: SGLANG_KEEP_ALIVE_TIMEOUT_MS - 1_000,
    maxAttempts: 2,
    maxBodyBytes: 64 * 1024 * 1024,
    maxAnswerBytes: 64 * 1024 * 1024,
    ...options,
  };
  const agent = new Agent({
    connections: settings.connectionsPerEndpoint,
    keepAliveTimeout: settings.keepAliveTimeoutMs,
  });
  const auth = runtimeKeys ? new RuntimeAuthorization(table, runtimeKeys) : undefined;
  const send: SendOptions = {
    agent,
    headersTimeoutMs: settings.headersTimeoutMs,
    bodyTimeoutMs: settings.bodyTimeoutMs,
    maxBodyBytes: settings.maxBodyBytes,
    maxAnswerBytes: settings.maxAnswerBytes,
    ...(auth ? { authorizationFor: (baseUrl: string) => auth.headerFor(baseUrl) } : {}),
  };
  return { settings, send, close: () => agent.close() };
}
