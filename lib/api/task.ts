import { z } from 'zod';
import { Conditions, ConfigMapKeySelector, LocalObjectReference, SecretKeySelector } from './common.ts';
import { withRules } from './rules.ts';

export const OpenRouterTarget = z
  .object({
    model: z
      .string()
      .min(1)
      .max(253)
      .meta({ description: 'OpenRouter model slug, e.g. openai/gpt-4.1-mini.' }),
    upstreamProvider: z
      .string()
      .min(1)
      .max(63)
      .regex(/^[a-z0-9][a-z0-9-]*$/)
      .meta({
        description: 'The one upstream provider slug (provider.only and provider.order); no fallbacks.',
      }),
    inputTokenUpperBound: z.number().int().min(1).meta({
      description:
        'Operator reservation of input tokens, checked against budget.maxInputTokens before sending.',
    }),
    cacheWriteUsage: z.enum(['required', 'not_applicable']).meta({
      description:
        'required: the response must report cache writes; not_applicable: only an absent or zero write.',
    }),
    apiKeySecretRef: SecretKeySelector.meta({ description: 'Secret key holding the OpenRouter API key.' }),
  })
  .meta({ description: 'OpenRouter Chat Completions with a pinned upstream provider.' });

export const TaskTarget = withRules(
  z
    .object({
      deployment: LocalObjectReference.optional().meta({
        description: 'A cacheroute Deployment in the same namespace.',
      }),
      openrouter: OpenRouterTarget.optional(),
    })
    .meta({ description: 'Where the task runs: exactly one of deployment or openrouter.' }),
  [
    {
      cel: '(has(self.deployment) ? 1 : 0) + (has(self.openrouter) ? 1 : 0) == 1',
      message: 'target needs exactly one of deployment or openrouter',
      check: (s) => (s.deployment ? 1 : 0) + (s.openrouter ? 1 : 0) === 1,
    },
  ],
);

export const ChatMessage = z.object({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.string().max(262144),
});

export const TaskInput = withRules(
  z
    .object({
      prompt: z
        .string()
        .max(262144)
        .optional()
        .meta({ description: 'A plain prompt, sent as text: no chat template is applied.' }),
      messages: z
        .array(ChatMessage)
        .min(1)
        .max(256)
        .optional()
        .meta({
          description:
            "Chat messages (text only), rendered by the model's own chat template: on SGLang by the runtime " +
            '(its /tokenize renders them as for a chat completion), on OpenRouter upstream.',
        }),
      configMapRef: ConfigMapKeySelector.optional().meta({
        description: 'A plain prompt stored in a ConfigMap key, sent as text.',
      }),
    })
    .meta({ description: 'The input: exactly one of prompt, messages or configMapRef.' }),
  [
    {
      cel: '(has(self.prompt) ? 1 : 0) + (has(self.messages) ? 1 : 0) + (has(self.configMapRef) ? 1 : 0) == 1',
      message: 'input needs exactly one of prompt, messages or configMapRef',
      check: (s) => [s.prompt, s.messages, s.configMapRef].filter((x) => x !== undefined).length === 1,
    },
  ],
);

export const Sampling = z
  .object({
    temperature: z
      .number()
      .min(0, 'sampling.temperature must be between 0 and 2')
      .max(2, 'sampling.temperature must be between 0 and 2')
      .default(0)
      .meta({ description: '0 is greedy (0..2).' }),
    topP: z
      .number()
      .gt(0, 'sampling.topP must be above 0 and at most 1')
      .max(1, 'sampling.topP must be above 0 and at most 1')
      .optional()
      .meta({ description: '0 < topP <= 1.' }),
    topK: z.number().int().optional(),
    seed: z.number().int().optional(),
    stop: z.array(z.string().max(256)).max(16).optional(),
  })
  .meta({ description: 'Sampling settings; part of the fingerprint.' });

const Decimal = z
  .string()
  .regex(/^[0-9]+(\.[0-9]+)?$/)
  .max(32);

export const Budget = withRules(
  z
    .object({
      maxInputTokens: z
        .number()
        .int()
        .min(1, 'budget.maxInputTokens must be positive')
        .meta({ description: 'Input token cap, checked before sending.' }),
      maxOutputTokens: z
        .number()
        .int()
        .min(1, 'budget.maxOutputTokens must be positive')
        .optional()
        .meta({ description: 'Output token cap (defaults to spec.maxOutputTokens).' }),
      prices: z
        .object({
          inputPerMillion: Decimal,
          outputPerMillion: Decimal,
          cachedInputPerMillion: Decimal.optional(),
          cacheWritePerMillion: Decimal.optional(),
        })
        .optional()
        .meta({ description: 'Price table per million tokens, as decimal strings.' }),
      maxCost: Decimal.optional().meta({
        description: 'Cost cap in the price table currency; needs prices.',
      }),
      currency: z
        .string()
        .regex(/^[A-Z]{3}$/)
        .default('USD'),
    })
    .meta({ description: 'Token caps and an optional cost cap.' }),
  [
    {
      cel: '!has(self.maxCost) || has(self.prices)',
      message: 'budget.maxCost needs budget.prices to compute a cost',
      fieldPath: '.maxCost',
      check: (s) => s.maxCost === undefined || s.prices !== undefined,
    },
  ],
);

export const OutputCheck = withRules(
  z.object({
    name: z.string().min(1).max(63),
    type: z.enum(['Regex', 'JSONSchema', 'Length']),
    pattern: z
      .string()
      .max(4096)
      .optional()
      .meta({
        description:
          'Regex the output must match somewhere (type Regex), in RE2 syntax: matching takes time linear ' +
          'in the output. A pattern RE2 cannot compile (backreferences, lookaround) fails the Task with ' +
          'reason InvalidCheck before it generates.',
      }),
    schema: z
      .string()
      .max(65536)
      .optional()
      .meta({ description: 'JSON schema the output must satisfy, as JSON (type JSONSchema).' }),
    min: z
      .number()
      .int()
      .min(0)
      .optional()
      .meta({ description: 'Minimum output length in characters (type Length).' }),
    max: z
      .number()
      .int()
      .min(0)
      .optional()
      .meta({ description: 'Maximum output length in characters (type Length).' }),
  }),
  [
    {
      cel: "self.type != 'Regex' || has(self.pattern)",
      message: 'a Regex check needs pattern',
      check: (s) => s.type !== 'Regex' || s.pattern !== undefined,
    },
    {
      cel: "self.type != 'JSONSchema' || has(self.schema)",
      message: 'a JSONSchema check needs schema',
      check: (s) => s.type !== 'JSONSchema' || s.schema !== undefined,
    },
    {
      cel: "self.type != 'Length' || has(self.min) || has(self.max)",
      message: 'a Length check needs min or max',
      check: (s) => s.type !== 'Length' || s.min !== undefined || s.max !== undefined,
    },
  ],
);

export const Review = withRules(
  z
    .object({
      required: z
        .boolean()
        .default(false)
        .meta({ description: 'Wait in AwaitingReview for a person to accept.' }),
      decision: z.enum(['Accepted', 'Rework']).optional().meta({ description: 'Set by the reviewer.' }),
      feedback: z
        .string()
        .max(16384)
        .optional()
        .meta({ description: 'Reviewer feedback; appended to the next attempt on Rework.' }),
    })
    .meta({ description: 'Human review. The only part of spec that may change once the task started.' }),
  [
    {
      cel: "!has(self.decision) || self.decision != 'Rework' || (has(self.feedback) && size(self.feedback) > 0)",
      message: 'review.decision Rework needs feedback that says what to change',
      fieldPath: '.feedback',
      check: (s) => s.decision !== 'Rework' || (s.feedback ?? '').length > 0,
    },
  ],
);

export const TaskReuse = z
  .object({
    enabled: z.boolean().default(true),
    ttlSeconds: z
      .number()
      .int()
      .min(1)
      .max(31536000)
      .default(86400)
      .meta({ description: 'How old a reusable result may be.' }),
    onInFlight: z.enum(['Wait', 'Fail']).default('Wait').meta({
      description: 'When an identical task is running: wait and reuse it, or fail with reason InFlight.',
    }),
  })
  .meta({ description: 'Completed-result reuse across tasks with the same fingerprint.' });

export const TaskSpec = withRules(
  z.object({
    target: TaskTarget,
    input: TaskInput,
    sampling: Sampling.prefault({}),
    maxOutputTokens: z
      .number()
      .int()
      .min(1, 'maxOutputTokens must be positive')
      .meta({ description: 'Output cap sent to the runtime (max_new_tokens / max_tokens).' }),
    budget: Budget,
    reuse: TaskReuse.prefault({}),
    checks: z
      .array(OutputCheck)
      .max(16)
      .optional()
      .meta({ description: 'Output checks run before success: regex, JSON schema, length.' }),
    checkRetries: z
      .number()
      .int()
      .min(0)
      .max(5)
      .default(0)
      .meta({ description: 'Automatic new attempts after a failed check.' }),
    review: Review.prefault({}),
  }),
  [
    {
      cel: '!has(self.target.openrouter) || has(self.budget.maxCost)',
      message:
        'an openrouter task is a paid call: it needs budget.prices and budget.maxCost (the most it may cost)',
      fieldPath: '.budget',
      check: (s) => s.target.openrouter === undefined || s.budget.maxCost !== undefined,
    },
    {
      cel: '!has(self.target.openrouter) || self.target.openrouter.inputTokenUpperBound <= self.budget.maxInputTokens',
      message: 'target.openrouter.inputTokenUpperBound must fit budget.maxInputTokens',
      fieldPath: '.target.openrouter.inputTokenUpperBound',
      check: (s) =>
        s.target.openrouter === undefined ||
        s.target.openrouter.inputTokenUpperBound <= s.budget.maxInputTokens,
    },
  ],
);
export type TaskSpec = z.infer<typeof TaskSpec>;

export const TASK_PHASES = [
  'Pending',
  'Running',
  'Checking',
  'AwaitingReview',
  'Succeeded',
  'Reused',
  'Failed',
] as const;
export const TaskPhase = z.enum(TASK_PHASES);
export type TaskPhase = z.infer<typeof TaskPhase>;

export const TokenUsage = z.object({
  promptTokens: z.number().int().optional(),
  completionTokens: z.number().int().optional(),
  cachedTokens: z.number().int().optional(),
  cachedTokensDevice: z.number().int().optional(),
  cachedTokensHost: z.number().int().optional(),
  cacheWriteTokens: z.number().int().optional(),
  newGeneration: z.boolean().optional().meta({ description: 'False when the result was reused.' }),
});

export const TaskAttempt = z.object({
  attempt: z.number().int(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  outcome: z.string().optional(),
  message: z.string().optional(),
  usage: TokenUsage.optional(),
  resultSha256: z.string().optional(),
  reviewDecision: z.string().optional(),
  reviewFeedback: z.string().optional(),
});

export const TaskStatus = z.object({
  observedGeneration: z.number().int().optional(),
  phase: TaskPhase.optional(),
  conditions: Conditions.optional(),
  fingerprint: z
    .string()
    .optional()
    .meta({ description: 'Fingerprint of the approved snapshot and provider identity.' }),
  attempts: z.array(TaskAttempt).optional(),
  usage: TokenUsage.optional(),
  cost: z.string().optional().meta({ description: 'Cost from the price table, as a decimal string.' }),
  result: z
    .object({
      inline: z.string().optional(),
      configMapRef: ConfigMapKeySelector.optional(),
      sha256: z.string().optional(),
      bytes: z.number().int().optional(),
    })
    .optional(),
  reusedFrom: z.object({ name: z.string(), fingerprint: z.string().optional() }).optional(),
  runtimeIdentity: z.record(z.string(), z.string()).optional(),
  startedAt: z.string().optional(),
  completedAt: z.string().optional(),
});
export type TaskStatus = z.infer<typeof TaskStatus>;
