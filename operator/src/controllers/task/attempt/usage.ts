// The usage contract: a generation counts only with known, consistent usage.
//
// Unknown usage stops the task (reason UsageUnknown): a missing counter is
// never read as zero, contradictory counters are never reconciled, and the
// call is never retried (it may already have been charged).
//
// SGLang (meta_info of a finished native /generate): prompt_tokens,
// completion_tokens and cached_tokens are required; prompt_tokens must equal
// the token ids we sent; cached <= prompt; completion <= max_new_tokens; when
// cached_tokens_details is present its device + host (+ storage) must add up
// to cached_tokens, and null details with nothing cached are zero on every tier
// (SGLang's answer when nothing was cached). KV hits are runtime metrics, not
// billable cache tokens.
//
// OpenRouter (usage of a Chat Completions response): prompt_tokens,
// completion_tokens and prompt_tokens_details.cached_tokens (the cache read)
// are required. cache_write_usage "required" needs an explicit
// prompt_tokens_details.cache_write_tokens; "not_applicable" allows it only
// absent or zero. Read and write are disjoint parts of prompt_tokens; a
// total_tokens must be prompt + completion; reasoning is part of completion.
import { z } from 'zod';
import { TaskReason } from './reasons.ts';
import { err, ok, type AttemptError, type Result, type Usage } from './types.ts';

export const UsageIssueCode = {
  UsageMissing: 'UsageMissing',
  CounterMissing: 'CounterMissing',
  CounterInvalid: 'CounterInvalid',
  CountersContradictory: 'CountersContradictory',
  CacheWriteUnexpected: 'CacheWriteUnexpected',
} as const;
export type UsageIssueCode = (typeof UsageIssueCode)[keyof typeof UsageIssueCode];

export interface UsageIssue {
  code: UsageIssueCode;
  path: string;
  message: string;
}

export function toAttemptError(issue: UsageIssue): AttemptError {
  return { reason: TaskReason.UsageUnknown, code: issue.code, message: `${issue.path}: ${issue.message}` };
}

const Counter = z.number().int().nonnegative().nullish();

const SglangMeta = z.looseObject({
  prompt_tokens: Counter,
  completion_tokens: Counter,
  cached_tokens: Counter,
  cached_tokens_details: z.looseObject({ device: Counter, host: Counter, storage: Counter }).nullish(),
});

const OpenRouterUsage = z.looseObject({
  prompt_tokens: Counter,
  completion_tokens: Counter,
  total_tokens: Counter,
  prompt_tokens_details: z.looseObject({ cached_tokens: Counter, cache_write_tokens: Counter }).nullish(),
  completion_tokens_details: z.looseObject({ reasoning_tokens: Counter }).nullish(),
});

function issue(code: UsageIssueCode, path: string, message: string): { ok: false; error: UsageIssue } {
  return err({ code, path, message });
}

function parse<S extends z.ZodType>(schema: S, raw: unknown, root: string): Result<z.infer<S>, UsageIssue> {
  if (raw === undefined || raw === null || typeof raw !== 'object' || Array.isArray(raw))
    return issue(UsageIssueCode.UsageMissing, root, 'no usage reported');
  const r = schema.safeParse(raw);
  if (r.success) return ok(r.data);
  const first = r.error.issues[0];
  const path = [root, ...(first?.path ?? []).map(String)].join('.');
  return issue(
    UsageIssueCode.CounterInvalid,
    path,
    `not a non-negative integer (${first?.message ?? 'invalid'})`,
  );
}

function required(value: number | null | undefined, path: string): Result<number, UsageIssue> {
  return value === undefined || value === null
    ? issue(UsageIssueCode.CounterMissing, path, 'required counter is missing')
    : ok(value);
}

export interface SglangUsageContext {
  /** The number of token ids sent as input_ids. */
  sentInputTokens: number;
  maxNewTokens: number;
}

export function computeSglangUsage(metaInfo: unknown, ctx: SglangUsageContext): Result<Usage, UsageIssue> {
  const parsed = parse(SglangMeta, metaInfo, 'meta_info');
  if (!parsed.ok) return parsed;
  const m = parsed.value;
  const prompt = required(m.prompt_tokens, 'meta_info.prompt_tokens');
  if (!prompt.ok) return prompt;
  const completion = required(m.completion_tokens, 'meta_info.completion_tokens');
  if (!completion.ok) return completion;
  const cached = required(m.cached_tokens, 'meta_info.cached_tokens');
  if (!cached.ok) return cached;
  const contradictory = (path: string, message: string) =>
    issue(UsageIssueCode.CountersContradictory, path, message);
  if (prompt.value !== ctx.sentInputTokens)
    return contradictory(
      'meta_info.prompt_tokens',
      `runtime counted ${prompt.value} prompt tokens, ${ctx.sentInputTokens} were sent`,
    );
  if (cached.value > prompt.value)
    return contradictory(
      'meta_info.cached_tokens',
      `${cached.value} cached exceeds ${prompt.value} prompt tokens`,
    );
  if (completion.value > ctx.maxNewTokens)
    return contradictory(
      'meta_info.completion_tokens',
      `${completion.value} completion tokens exceed max_new_tokens ${ctx.maxNewTokens}`,
    );
  const usage: Usage = {
    promptTokens: prompt.value,
    completionTokens: completion.value,
    cachedTokens: cached.value,
  };
  const d = m.cached_tokens_details;
  if (d) {
    const device = d.device ?? 0;
    const host = d.host ?? 0;
    const sum = device + host + (d.storage ?? 0);
    if (sum !== cached.value)
      return contradictory(
        'meta_info.cached_tokens_details',
        `device + host (+ storage) = ${sum}, cached_tokens = ${cached.value}`,
      );
    usage.cachedTokensDevice = device;
    usage.cachedTokensHost = host;
  } else if (d === null && cached.value === 0) {
    // SGLang 0.5.23 answers null details exactly when nothing was cached: no tier holds any of it.
    usage.cachedTokensDevice = 0;
    usage.cachedTokensHost = 0;
  }
  return ok(usage);
}

export interface OpenRouterUsageContext {
  cacheWriteUsage: 'required' | 'not_applicable';
}

type OpenRouterUsageFields = z.infer<typeof OpenRouterUsage>;

/** The cache-write tokens: required where the provider bills them, else absent or 0. */
function openRouterCacheWrite(
  writeRaw: number | null | undefined,
  ctx: OpenRouterUsageContext,
): Result<number, UsageIssue> {
  const path = 'usage.prompt_tokens_details.cache_write_tokens';
  if (ctx.cacheWriteUsage === 'required') return required(writeRaw, path);
  if (writeRaw !== undefined && writeRaw !== null && writeRaw !== 0)
    return issue(
      UsageIssueCode.CacheWriteUnexpected,
      path,
      `${writeRaw} cache-write tokens reported, but cacheWriteUsage is not_applicable`,
    );
  return ok(0);
}

/** The counters must add up: cache within the prompt, total the sum, reasoning within completion. */
function checkOpenRouterCounters(
  u: OpenRouterUsageFields,
  counts: { prompt: number; completion: number; read: number; write: number },
): Result<void, UsageIssue> {
  const { prompt, completion, read, write } = counts;
  const contradictory = (path: string, message: string) =>
    issue(UsageIssueCode.CountersContradictory, path, message);
  if (read + write > prompt)
    return contradictory(
      'usage.prompt_tokens_details',
      `cache read ${read} + write ${write} exceed ${prompt} prompt tokens`,
    );
  if (u.total_tokens !== undefined && u.total_tokens !== null && u.total_tokens !== prompt + completion)
    return contradictory(
      'usage.total_tokens',
      `${u.total_tokens} is not prompt ${prompt} + completion ${completion}`,
    );
  const reasoning = u.completion_tokens_details?.reasoning_tokens;
  if (reasoning !== undefined && reasoning !== null && reasoning > completion)
    return contradictory(
      'usage.completion_tokens_details.reasoning_tokens',
      `${reasoning} reasoning tokens exceed ${completion} completion tokens (reasoning is part of completion)`,
    );
  return ok(undefined);
}

export function computeOpenRouterUsage(raw: unknown, ctx: OpenRouterUsageContext): Result<Usage, UsageIssue> {
  const parsed = parse(OpenRouterUsage, raw, 'usage');
  if (!parsed.ok) return parsed;
  const u = parsed.value;
  const prompt = required(u.prompt_tokens, 'usage.prompt_tokens');
  if (!prompt.ok) return prompt;
  const completion = required(u.completion_tokens, 'usage.completion_tokens');
  if (!completion.ok) return completion;
  const read = required(u.prompt_tokens_details?.cached_tokens, 'usage.prompt_tokens_details.cached_tokens');
  if (!read.ok) return read;
  const write = openRouterCacheWrite(u.prompt_tokens_details?.cache_write_tokens, ctx);
  if (!write.ok) return write;
  const counters = checkOpenRouterCounters(u, {
    prompt: prompt.value,
    completion: completion.value,
    read: read.value,
    write: write.value,
  });
  if (!counters.ok) return counters;
  const usage: Usage = {
    promptTokens: prompt.value,
    completionTokens: completion.value,
    cachedTokens: read.value,
    cacheWriteTokens: write.value,
  };
  const reasoning = u.completion_tokens_details?.reasoning_tokens;
  if (reasoning !== undefined && reasoning !== null) usage.reasoningTokens = reasoning;
  return ok(usage);
}
