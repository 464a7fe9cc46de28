// SGLang's API keys (--api-key, --admin-api-key), as sglang/srt/utils/auth.py
// decides them before any route runs: health, readiness and metrics paths
// are always open; routes http_server.py marks ADMIN_OPTIONAL take the admin
// key where one is set, else the API key; every other path (unknown ones
// too) takes the API key. A refusal is 401 {"error": "Unauthorized"} (403
// "Forbidden" is for ADMIN_FORCE routes, which 0.5.23 does not use). The
// conformance suite holds decideRequestAuth and ADMIN_OPTIONAL_ROUTES to
// SGLang's own function and source (test/conformance/auth.test.ts).

import { timingSafeEqual } from 'node:crypto';

export type AuthLevel = 'normal' | 'admin_optional';

/** Routes SGLang 0.5.23's http_server.py marks @auth_level(AuthLevel.ADMIN_OPTIONAL). */
export const ADMIN_OPTIONAL_ROUTES: readonly string[] = [
  '/abort_request',
  '/add_external_corpus',
  '/begin_weight_update',
  '/configure_logging',
  '/continue_generation',
  '/destroy_weights_update_group',
  '/dump_expert_distribution_record',
  '/dumper/{method}',
  '/end_weight_update',
  '/flush_cache',
  '/freeze_gc',
  '/get_remote_instance_transfer_engine_info',
  '/get_weights_by_name',
  '/hicache/storage-backend',
  '/hicache/storage-backend/clear',
  '/init_weights_send_group_for_remote_instance',
  '/init_weights_update_group',
  '/list_external_corpora',
  '/load_lora_adapter',
  '/load_lora_adapter_from_tensors',
  '/pause_generation',
  '/pd_role_switch',
  '/release_memory_occupation',
  '/remote_instance_transfer_engine_info',
  '/remove_external_corpus',
  '/resume_memory_occupation',
  '/send_weights_to_remote_instance',
  '/set_internal_state',
  '/set_trace_level',
  '/slow_down',
  '/start_expert_distribution_record',
  '/start_profile',
  '/stop_expert_distribution_record',
  '/stop_profile',
  '/unload_lora_adapter',
  '/update_weight_version',
  '/update_weights_from_disk',
  '/update_weights_from_distributed',
  '/update_weights_from_ipc',
  '/update_weights_from_tensor',
  '/weights_checker',
];

const ADMIN_OPTIONAL = ADMIN_OPTIONAL_ROUTES.map((r) => new RegExp(`^${r.replace(/\{[^}]+\}/g, '[^/]+')}$`));

export function authLevelOf(path: string): AuthLevel {
  return ADMIN_OPTIONAL.some((re) => re.test(path)) ? 'admin_optional' : 'normal';
}

export interface AuthCase {
  readonly method: string;
  readonly path: string;
  readonly authorization?: string | undefined;
  readonly apiKey?: string | null | undefined;
  readonly adminApiKey?: string | null | undefined;
  readonly level: AuthLevel;
}

export interface AuthDecision {
  readonly allowed: boolean;
  /** Meaningful when refused. */
  readonly status: 401 | 403;
}

const ALLOWED: AuthDecision = { allowed: true, status: 401 };
const REFUSED: AuthDecision = { allowed: false, status: 401 };

/** decide_request_auth, for the levels SGLang 0.5.23 uses. */
export function decideRequestAuth(c: AuthCase): AuthDecision {
  if (c.method === 'OPTIONS') return ALLOWED;
  if (c.path.startsWith('/health') || c.path.startsWith('/ready') || c.path.startsWith('/metrics'))
    return ALLOWED;
  const bearer = (expected: string): AuthDecision =>
    matchesBearer(c.authorization, expected) ? ALLOWED : REFUSED;
  if (c.level === 'admin_optional') {
    if (c.adminApiKey) return bearer(c.adminApiKey);
    if (c.apiKey) return bearer(c.apiKey);
    return ALLOWED;
  }
  return c.apiKey ? bearer(c.apiKey) : ALLOWED;
}

/** `Bearer <token>` (scheme case-insensitive, one space), compared in constant time as secrets.compare_digest does. */
function matchesBearer(header: string | undefined, expected: string): boolean {
  if (!header) return false;
  const space = header.indexOf(' ');
  if (space < 0 || header.slice(0, space).toLowerCase() !== 'bearer') return false;
  const got = Buffer.from(header.slice(space + 1));
  const want = Buffer.from(expected);
  return got.length === want.length && timingSafeEqual(got, want);
}
