// zod schemas of the request bodies the simulator accepts, after SGLang's
// GenerateReqInput (managers/io_struct.py) and its OpenAI protocol models.
// Objects are loose: SGLang accepts fields the simulator ignores.

import { z } from 'zod';

const stop = z.union([z.string(), z.array(z.string())]);
const tokenIds = z.array(z.number().int().nonnegative());

export const SamplingParams = z
  .object({
    // Types only: SGLang checks ranges later, in SamplingParams.verify (sampling.ts).
    max_new_tokens: z.number().int().nullish(),
    min_new_tokens: z.number().int().nullish(),
    temperature: z.number().nullish(),
    top_p: z.number().nullish(),
    top_k: z.number().int().nullish(),
    min_p: z.number().nullish(),
    stop: stop.nullish(),
    stop_token_ids: tokenIds.nullish(),
    ignore_eos: z.boolean().nullish(),
    n: z.number().int().nullish(),
    sampling_seed: z.number().int().nullish(),
  })
  .loose();
export type SamplingParams = z.infer<typeof SamplingParams>;
export const SamplingParamsOrList = z.union([SamplingParams, z.array(SamplingParams)]).nullish();

const bootstrap = {
  bootstrap_host: z.string().nullish(),
  bootstrap_port: z.number().int().nonnegative().nullish(),
  bootstrap_room: z.number().int().nonnegative().nullish(),
};
const namespace = {
  cache_salt: z.string().nullish(),
  extra_key: z.string().nullish(),
  rid: z.string().nullish(),
  priority: z.number().int().nullish(),
};

export const GenerateRequest = z
  .object({
    text: z.union([z.string(), z.array(z.string()).min(1)]).optional(),
    input_ids: z.union([tokenIds, z.array(tokenIds).min(1)]).optional(),
    input_embeds: z.unknown().optional(),
    // FastAPI's parse takes any object (or list of objects); the contract gate and
    // SamplingParamsOrList (below) judge the inside.
    sampling_params: z
      .union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown()))])
      .nullish(),
    stream: z.boolean().optional(),
    rid: z.union([z.string(), z.array(z.string())]).nullish(),
    return_logprob: z.union([z.boolean(), z.array(z.boolean())]).optional(),
    ...bootstrap,
    cache_salt: z.string().nullish(),
    extra_key: z.string().nullish(),
    priority: z.number().int().nullish(),
    routed_dp_rank: z.number().int().nullish(),
    routing_key: z.string().nullish(),
    lora_path: z.unknown().optional(),
    session_params: z.unknown().optional(),
  })
  .loose();
export type GenerateRequest = z.infer<typeof GenerateRequest>;

const contentPart = z.object({ type: z.string(), text: z.string().optional() }).loose();
export const ChatMessage = z
  .object({
    role: z.enum(['system', 'user', 'assistant', 'tool', 'developer']),
    content: z.union([z.string(), z.array(contentPart)]).nullish(),
  })
  .loose();

const openAiCommon = {
  model: z.string().optional(),
  max_tokens: z.number().int().nonnegative().nullish(),
  stream: z.boolean().optional(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).loose().nullish(),
  // Ranges are SamplingParams.verify's (sampling.ts), a BadRequestError, not a parse error.
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  stop: stop.nullish(),
  stop_token_ids: tokenIds.nullish(),
  seed: z.number().int().nullish(),
  n: z.number().int().positive().nullish(),
  ignore_eos: z.boolean().optional(),
  ...bootstrap,
  ...namespace,
};

export const ChatCompletionRequest = z
  .object({
    ...openAiCommon,
    messages: z.array(ChatMessage).min(1),
    max_completion_tokens: z.number().int().nonnegative().nullish(),
  })
  .loose();
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;

export const CompletionRequest = z
  .object({
    ...openAiCommon,
    prompt: z.union([z.string(), z.array(z.string()).min(1), tokenIds.min(1), z.array(tokenIds).min(1)]),
  })
  .loose();
export type CompletionRequest = z.infer<typeof CompletionRequest>;

/**
 * SGLang 0.5.23's TokenizeRequest (entrypoints/openai/protocol.py): a prompt, or chat
 * messages the runtime renders as for a chat completion; exactly one of them.
 */
export const TokenizeRequest = z
  .object({
    prompt: z.union([z.string(), z.array(z.string())]).nullish(),
    messages: z.array(ChatMessage).nullish(),
    add_special_tokens: z.boolean().optional(),
    add_generation_prompt: z.boolean().nullish(),
  })
  .loose()
  .refine((b) => (b.prompt == null) !== (b.messages == null), {
    message: "Value error, Exactly one of 'prompt' or 'messages' must be provided.",
  });

export const DetokenizeRequest = z
  .object({
    tokens: z.array(z.number().int()),
    skip_special_tokens: z.boolean().optional(),
  })
  .loose();

export const LoadsQuery = z.object({
  include: z
    .string()
    .optional()
    .refine(
      (s) =>
        s === undefined ||
        s.split(',').every((p) => ['core', 'memory', 'queues', 'all', 'spec', 'lora', 'disagg'].includes(p)),
      {
        message: 'include must be a comma list of core, memory, queues, all',
      },
    ),
  format: z.enum(['json', 'prometheus']).optional(),
});

type Issue = z.core.$ZodIssue;

/** Descend into union failures: report the branch of the union that got furthest (the object one). */
function flattenIssue(
  issue: Issue,
  prefix: readonly PropertyKey[],
): { path: PropertyKey[]; message: string }[] {
  const path = [...prefix, ...issue.path];
  if (issue.code === 'invalid_union' && issue.errors.length > 0) {
    const branch = [...issue.errors].sort((a, b) => maxDepth(b) - maxDepth(a))[0] ?? [];
    const nested = branch.flatMap((i) => flattenIssue(i, path));
    if (nested.length > 0 && maxDepth(branch) > 0) return nested;
  }
  return [{ path, message: issue.message }];
}

function maxDepth(issues: readonly Issue[]): number {
  return Math.max(0, ...issues.map((i) => i.path.length));
}

/** "field.path: message" for the first few issues (SGLang's 400 lists pydantic's; the words differ). */
export function formatZodError(error: z.ZodError): string {
  return error.issues
    .flatMap((i) => flattenIssue(i, []))
    .slice(0, 3)
    .map((i) => `${i.path.length > 0 ? i.path.map(String).join('.') : 'body'}: ${i.message}`)
    .join('; ');
}
