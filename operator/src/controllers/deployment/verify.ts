import type { EndpointEvents } from '../../api/index.ts';
import { fetchModelInfo, fetchServerInfo } from '../../sglang/client.ts';
import { toEndpointEvents } from '../../sglang/publishers.ts';
import {
  compareIdentity,
  computeRuntimeIdentity,
  formatMismatches,
  type RuntimeIdentity,
} from '../../sglang/identity.ts';

export type IdentityReadback =
  | { ok: true; reported: RuntimeIdentity; mismatches: string; events?: EndpointEvents }
  | { ok: false; error: string };

/** Reads what the runtime at `baseUrl` says it is and compares it with what was declared. */
export async function readIdentity(
  baseUrl: string,
  declared: RuntimeIdentity,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<IdentityReadback> {
  const [server, model] = await Promise.all([fetchServerInfo(baseUrl, opts), fetchModelInfo(baseUrl, opts)]);
  if (!server.ok) return { ok: false, error: server.error };
  if (!model.ok) return { ok: false, error: model.error };
  const reported = computeRuntimeIdentity(server.value, model.value);
  const mismatches = formatMismatches(compareIdentity(declared, reported));
  const events = server.value.kv_events ? toEndpointEvents(server.value.kv_events) : undefined;
  return { ok: true, reported, mismatches, ...(events ? { events } : {}) };
}
