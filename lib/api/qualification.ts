// A Qualification: a matched, live comparison of two Deployments (arms) that
// differ only in a declared subject (the cache profile by default), under the
// seed's protocol (cold sample in a fresh cache namespace, identical warm
// repeat, arms alternating, failures recorded), with per-arm distributions, a
// verdict with its bootstrap interval and the evidence level. ADR 0033.
import { z } from 'zod';
import { Conditions, ConfigMapKeySelector, DnsLabel, LocalObjectReference } from './common.ts';
import { withRules } from './rules.ts';
import { Sampling } from './task.ts';

/** Requests one pass (cold or warm) of a sample may send: the whole record stays in one ConfigMap. */
export const MAX_REQUESTS_PER_PASS = 64;
export const MAX_SAMPLES_PER_ARM = 10;

const Decimal = z
  .string()
  .regex(/^[0-9]+(\.[0-9]+)?$/)
  .max(32);

/** A pseudo-random draw's seed (0 to 2^31, default 1); `description` says what it draws. */
function seedField(description: string) {
  return z
    .number()
    .int()
    .min(0)
    .max(2 ** 31)
    .default(1)
    .meta({ description });
}

export const QualificationArm = z
  .object({
    name: DnsLabel.meta({ description: 'Short name of the arm in the report, e.g. dense or hicache.' }),
    deployment: LocalObjectReference.meta({ description: 'A cacheroute Deployment in this namespace.' }),
  })
  .meta({ description: 'One side of the comparison: a Deployment measured on its own endpoint.' });

export const QualificationSubject = z.enum(['Profile', 'Serving', 'RuntimeArgs']).meta({
  description:
    'What the arms may differ in. Profile: profile, radixCache, hicache, hisparse. Serving: spec.serving. ' +
    'RuntimeArgs: runtime.extraArgs. Model, tokenizer and image digests, topology and hardware class never.',
});
export type QualificationSubject = z.infer<typeof QualificationSubject>;

export const SharedPrefixConversations = z
  .object({
    conversations: z.number().int().min(1).max(MAX_REQUESTS_PER_PASS),
    turns: z
      .number()
      .int()
      .min(1)
      .max(MAX_REQUESTS_PER_PASS)
      .meta({ description: 'Requests per conversation; turn t sends the history of turns 1..t.' }),
    systemPromptWords: z
      .number()
      .int()
      .min(1)
      .max(65536)
      .meta({ description: 'Words of the system prompt every conversation shares.' }),
    turnWords: z.number().int().min(1).max(65536).meta({ description: 'Words each user turn adds.' }),
  })
  .meta({ description: 'Conversations that share one system prompt and grow turn by turn.' });

export const SharedDocuments = z
  .object({
    documents: z.number().int().min(1).max(MAX_REQUESTS_PER_PASS),
    documentWords: z.number().int().min(1).max(262144),
    questionsPerDocument: z.number().int().min(1).max(MAX_REQUESTS_PER_PASS),
    questionWords: z.number().int().min(1).max(4096),
  })
  .meta({
    description: 'Long documents, each asked several short questions (the document is the shared prefix).',
  });

export const WorkloadGenerator = withRules(
  z
    .object({
      seed: seedField('Seed of the generated text: the same seed gives the same requests.'),
      sharedPrefix: SharedPrefixConversations.optional(),
      documents: SharedDocuments.optional(),
    })
    .meta({
      description:
        'Built-in workload. Sizes are in words of generated text; the runtime reports the tokens it saw.',
    }),
  [
    {
      cel: 'has(self.sharedPrefix) || has(self.documents)',
      message: 'workload.generator needs sharedPrefix, documents or both',
      check: (s) => s.sharedPrefix !== undefined || s.documents !== undefined,
    },
    {
      cel:
        `(has(self.sharedPrefix) ? self.sharedPrefix.conversations * self.sharedPrefix.turns : 0) + ` +
        `(has(self.documents) ? self.documents.documents * self.documents.questionsPerDocument : 0) <= ${MAX_REQUESTS_PER_PASS}`,
      message: `workload.generator makes at most ${MAX_REQUESTS_PER_PASS} requests a pass (conversations x turns + documents x questionsPerDocument): lower them`,
      check: (s) =>
        (s.sharedPrefix ? s.sharedPrefix.conversations * s.sharedPrefix.turns : 0) +
          (s.documents ? s.documents.documents * s.documents.questionsPerDocument : 0) <=
        MAX_REQUESTS_PER_PASS,
    },
  ],
);
export type WorkloadGenerator = z.infer<typeof WorkloadGenerator>;

export const MooncakeTrace = z
  .object({
    configMapRef: ConfigMapKeySelector.meta({
      description:
        'A ConfigMap key holding Mooncake JSONL: one {"timestamp", "input_length", "output_length", "hash_ids"} a line.',
    }),
    blockWords: z.number().int().min(1).max(4096).default(512).meta({
      description: 'Words of text one hash id stands for (Mooncake traces hash blocks of 512 tokens).',
    }),
    maxRequests: z
      .number()
      .int()
      .min(1)
      .max(MAX_REQUESTS_PER_PASS)
      .default(32)
      .meta({ description: 'The first this many lines make a pass.' }),
  })
  .meta({
    description:
      'A Mooncake trace: equal hash ids become equal blocks of text, so shared prefixes are shared; timestamps and output_length are not replayed (spec.concurrency and spec.maxOutputTokens hold).',
  });

/** Highest open-loop rate: a pass is at most MAX_REQUESTS_PER_PASS requests, so this is already a burst. */
export const MAX_REQUESTS_PER_SECOND = 1000;

export const RequestRate = z
  .object({
    requestsPerSecond: z
      .number()
      .gt(
        0,
        'workload.requestRate.requestsPerSecond must be above 0 (a mean arrival rate, requests a second)',
      )
      .max(MAX_REQUESTS_PER_SECOND)
      .meta({ description: 'Mean arrival rate of the Poisson process, requests per second.' }),
    seed: seedField(
      'Seed of the arrival times: every pass of both arms sends its requests at the same offsets.',
    ),
  })
  .meta({
    description:
      'Open loop: requests are sent at Poisson arrival times (exponential gaps at this mean rate) whether or not earlier ones were answered, in the workload order. Exclusive with spec.concurrency.',
  });
export type RequestRate = z.infer<typeof RequestRate>;

export const QualificationWorkload = withRules(
  z
    .object({
      generator: WorkloadGenerator.optional(),
      trace: MooncakeTrace.optional(),
      requestRate: RequestRate.optional(),
    })
    .meta({
      description:
        'The requests of one pass (exactly one of generator or trace) and, for an open loop, when they are sent.',
    }),
  [
    {
      cel: '(has(self.generator) ? 1 : 0) + (has(self.trace) ? 1 : 0) == 1',
      message: 'workload needs exactly one of generator or trace',
      check: (s) => (s.generator ? 1 : 0) + (s.trace ? 1 : 0) === 1,
    },
  ],
);

export const QualificationBudget = z
  .object({
    maxDurationSeconds: z
      .number()
      .int()
      .min(1)
      .max(7 * 86400)
      .meta({
        description: 'No sample starts after this long since the run started; the report says it stopped.',
      }),
    maxTokens: z.number().int().min(1).optional().meta({
      description:
        'Prompt plus completion tokens over the whole run; no sample starts once spent (one sample may overshoot).',
    }),
  })
  .meta({ description: 'When the run stops short of samplesPerArm.' });

export const QualificationVerdictSpec = z
  .object({
    metric: z.enum(['TTFT', 'EndToEnd', 'InterToken']).default('TTFT'),
    pass: z.enum(['Warm', 'Cold']).default('Warm'),
  })
  .meta({ description: 'Which latency the verdict compares (the median of arm 2 minus arm 1).' });

export const QualificationSpec = withRules(
  z.object({
    arms: z.array(QualificationArm).length(2).meta({ description: 'The two Deployments compared.' }),
    subject: z
      .array(QualificationSubject)
      .min(1)
      .max(3)
      .default(['Profile'])
      .meta({ description: 'What the arms may differ in; any other difference refuses the run.' }),
    workload: QualificationWorkload,
    sampling: Sampling.prefault({}),
    maxOutputTokens: z
      .number()
      .int()
      .min(1)
      .max(4096)
      .meta({ description: 'Output cap of every request (max_new_tokens), the same on both arms.' }),
    concurrency: z.number().int().min(1).max(64).optional().meta({
      description:
        'Closed loop: requests in flight at once during a pass. Exactly one of concurrency or workload.requestRate.',
    }),
    samplesPerArm: z.number().int().min(1).max(MAX_SAMPLES_PER_ARM).meta({
      description:
        'Samples per arm; each is a cold pass in a fresh cache namespace and its identical warm repeat.',
    }),
    budget: QualificationBudget,
    pricePerGpuHour: Decimal.optional().meta({
      description: 'Declared price of one GPU-hour, for the cost line (currency below).',
    }),
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/)
      .default('USD')
      .meta({ description: 'Currency of pricePerGpuHour and the cost line.' }),
    verdict: QualificationVerdictSpec.prefault({}),
  }),
  [
    {
      cel: 'has(self.concurrency) != has(self.workload.requestRate)',
      message:
        'give exactly one of spec.concurrency (closed loop: requests in flight) or spec.workload.requestRate (open loop: Poisson arrivals)',
      check: (s) => (s.concurrency !== undefined) !== (s.workload.requestRate !== undefined),
    },
    {
      cel: 'self.arms[0].name != self.arms[1].name',
      message: 'the two arms need different names',
      fieldPath: '.arms',
      check: (s) => s.arms[0]?.name !== s.arms[1]?.name,
    },
    {
      cel: 'self.arms[0].deployment.name != self.arms[1].deployment.name',
      message: 'the two arms name the same Deployment: a qualification compares two',
      fieldPath: '.arms',
      check: (s) => s.arms[0]?.deployment.name !== s.arms[1]?.deployment.name,
    },
  ],
);
export type QualificationSpec = z.infer<typeof QualificationSpec>;

export const QUALIFICATION_PHASES = [
  'Pending',
  'Refused',
  'Running',
  'Succeeded',
  'Stopped',
  'Failed',
] as const;
export const QualificationPhase = z.enum(QUALIFICATION_PHASES);
export type QualificationPhase = z.infer<typeof QualificationPhase>;

export const EvidenceLevel = z.enum(['Simulator', 'RealEngine']).meta({
  description:
    "The seed's evidence level: Simulator (a cacheroute SGLang simulator answered: predicted timing, no measured speed-up) or RealEngine (an SGLang engine on this hardware).",
});
export type EvidenceLevel = z.infer<typeof EvidenceLevel>;

export const Quantiles = z.object({ p50: z.number(), p90: z.number(), p99: z.number() });
export type Quantiles = z.infer<typeof Quantiles>;

/** Steps of a stored distribution: its value at quantile i / CDF_STEPS, i = 0..CDF_STEPS. */
export const CDF_STEPS = 20;

const Cdf = z
  .array(z.number())
  .length(CDF_STEPS + 1)
  .meta({
    description: `Milliseconds at quantile i/${CDF_STEPS}, i = 0..${CDF_STEPS} (minimum to maximum): the distribution the status page plots.`,
  });

export const PassDistributions = z
  .object({ ttftMs: Cdf.optional(), interTokenMs: Cdf.optional(), e2eMs: Cdf.optional() })
  .meta({
    description:
      'Per-request latency distributions of the pass, as quantile curves: what a reader of the status (the gateway status page) plots without reading the record ConfigMap.',
  });
export type PassDistributions = z.infer<typeof PassDistributions>;

export const PassSummary = z.object({
  requests: z.number().int(),
  failures: z.number().int(),
  ttftMs: Quantiles.optional(),
  interTokenMs: Quantiles.optional().meta({
    description: 'Per request: (end-to-end - TTFT) / (output tokens - 1).',
  }),
  e2eMs: Quantiles.optional(),
  outputTokensPerSecond: Quantiles.optional().meta({
    description: 'Per sample: output tokens over its wall time.',
  }),
  promptTokens: z.number().int(),
  completionTokens: z.number().int(),
  cachedTokens: z.number().int(),
  cachedTokensDevice: z.number().int(),
  cachedTokensHost: z.number().int(),
  cachedTokensStorage: z.number().int(),
  cachedShare: z.number().optional().meta({ description: 'cachedTokens over promptTokens (0..1).' }),
  cdf: PassDistributions.optional(),
});
export type PassSummary = z.infer<typeof PassSummary>;

export const SamplePoint = z.object({
  sample: z.number().int(),
  failed: z.boolean(),
  coldCachedShare: z.number().optional(),
  warmCachedShare: z.number().optional(),
  coldTtftP50Ms: z.number().optional(),
  warmTtftP50Ms: z.number().optional(),
});
export type SamplePoint = z.infer<typeof SamplePoint>;

export const ArmStatus = z.object({
  name: z.string(),
  deployment: z.string(),
  deploymentId: z.string().optional(),
  fingerprint: z
    .string()
    .optional()
    .meta({ description: "The arm's identity fingerprint when the run started." }),
  profile: z.string().optional(),
  samplesDone: z.number().int(),
  samplesFailed: z.number().int(),
  progress: z.string().meta({ description: 'Samples run (done or failed) of samplesPerArm, e.g. 3/8.' }),
  cold: PassSummary.optional(),
  warm: PassSummary.optional(),
  gpuHours: z.string().optional(),
  cost: z.string().optional().meta({ description: 'gpuHours x pricePerGpuHour.' }),
  samples: z
    .array(SamplePoint)
    .optional()
    .meta({ description: 'One point a sample, in order: the series a plot over samples draws.' }),
});
export type ArmStatus = z.infer<typeof ArmStatus>;

export const QualificationVerdict = z.object({
  metric: z.string(),
  pass: z.string(),
  medianDifferenceMs: z.number().meta({ description: 'Median of arm 2 minus median of arm 1.' }),
  lowMs: z.number(),
  highMs: z.number(),
  confidence: z.number(),
  resamples: z.number().int(),
  faster: z.string().meta({ description: 'The arm whose interval is wholly faster, or None.' }),
  summary: z.string(),
});
export type QualificationVerdict = z.infer<typeof QualificationVerdict>;

export const QualificationStatus = z.object({
  observedGeneration: z.number().int().optional(),
  phase: QualificationPhase.optional(),
  conditions: Conditions.optional(),
  evidence: EvidenceLevel.optional(),
  progress: z.string().optional().meta({ description: 'Samples run of all samples, e.g. 5/16.' }),
  current: z
    .object({ slot: z.number().int(), arm: z.string(), sample: z.number().int(), salt: z.string() })
    .optional()
    .meta({ description: 'The sample in flight.' }),
  arms: z.array(ArmStatus).optional(),
  verdict: QualificationVerdict.optional(),
  record: ConfigMapKeySelector.pick({ name: true })
    .optional()
    .meta({ description: 'The ConfigMap holding every request of every sample, one key a sample.' }),
  usage: z.object({ promptTokens: z.number().int(), completionTokens: z.number().int() }).optional(),
  startedAt: z.string().optional(),
  completedAt: z.string().optional(),
});
export type QualificationStatus = z.infer<typeof QualificationStatus>;
