import { createHash, timingSafeEqual } from 'node:crypto';
import type { EndpointEvents } from '#api';
import { fetchModelInfo, fetchServerInfo } from '../../sglang-client/client.ts';
import { checkEndpointEvents } from '#api/event-bounds.ts';
import { toEndpointEvents } from '#api/publishers.ts';
import {
  compareIdentity,
  computeRuntimeIdentity,
  formatMismatches,
  type RuntimeIdentity,
} from '../../sglang-client/identity.ts';

export type IdentityReadback =
  | { ok: true; reported: RuntimeIdentity; mismatches: string; events?: EndpointEvents }
  | { ok: false; error: string };

/**
 * SGLang's /server_info lists every server arg, its API key among them, in clear (only to a
 * caller that sent the key). The key is checked here and goes nowhere else: not compared as an
 * identity field, not published, not in a message. A runtime reporting another key than the
 * Secret's is a mismatch, named without either value. One reporting none was started without
 * a key (a pod rendered before runtime keys, replaced by the rollout they bring) and is not
 * refused for that: refusing it would take every running pod out of routing at the upgrade.
 */
export function checkReportedApiKey(
  reported: string | null | undefined,
  expected: string | undefined,
): string | undefined {
  if (reported === null || reported === undefined || reported === '') return undefined;
  const digest = (k: string): Buffer => createHash('sha256').update(k).digest();
  if (expected !== undefined && timingSafeEqual(digest(reported), digest(expected))) return undefined;
  return 'apiKey: the runtime runs with another API key than its Secret holds for its fingerprint';
}

/**
 * Reads what the runtime at `baseUrl` says it is and compares it with what was declared. Its
 * event publishers are held to the spec's `dataParallel` ranks (lib/api/event-bounds.ts, the
 * gateway's bounds too): status copies them to every gateway replica, so a runtime reporting
 * more is a mismatch and none of its numbers are copied.
 */
export async function readIdentity(
  baseUrl: string,
  declared: RuntimeIdentity,
  opts: { timeoutMs: number; dataParallel: number; signal?: AbortSignal; apiKey?: string | undefined },
): Promise<IdentityReadback> {
  const [server, model] = await Promise.all([fetchServerInfo(baseUrl, opts), fetchModelInfo(baseUrl, opts)]);
  if (!server.ok) return { ok: false, error: server.error };
  if (!model.ok) return { ok: false, error: model.error };
  const reported = computeRuntimeIdentity(server.value, model.value);
  const advertised = server.value.kv_events ? toEndpointEvents(server.value.kv_events) : undefined;
  const outOfBounds = advertised ? checkEndpointEvents(advertised, opts.dataParallel) : undefined;
  const mismatches = [
    formatMismatches(compareIdentity(declared, reported)),
    checkReportedApiKey(server.value.api_key, opts.apiKey),
    outOfBounds === undefined ? undefined : `events: ${outOfBounds}`,
  ]
    .filter((m) => m !== undefined && m !== '')
    .join('; ');
  const events = outOfBounds === undefined ? advertised : undefined;
  return { ok: true, reported, mismatches, ...(events ? { events } : {}) };
}
