// A Tenant: who may call the gateway (API keys in a Secret), which models,
// how often, and how important its requests are when queues are full.
// ADR 0007 says why this is a kind of its own and not a CachePolicy section.
import { z } from 'zod';
import { Conditions, LocalObjectReference, ObjectName } from './common.ts';
import { withRules } from './rules.ts';

/** The label a key Secret carries: the gateway watches only labelled Secrets (ADR 0007). */
export const API_KEYS_LABEL = 'cacheroute.dev/api-keys';
/** Shorter keys are refused: a key is a bearer secret and must not be guessable. */
export const MIN_API_KEY_LENGTH = 32;

export const TenantLimits = withRules(
  z
    .object({
      requestsPerMinute: z.number().int().optional().meta({
        description: 'Requests per minute across the whole gateway tier; absent = no request limit.',
      }),
      tokensPerMinute: z.number().int().optional().meta({
        description:
          'Prompt plus completion tokens per minute across the whole gateway tier; absent = no token limit.',
      }),
    })
    .meta({
      description: 'Rate limits, over a sliding minute, shared by all gateway replicas (with Redis).',
    }),
  [
    {
      cel: '!has(self.requestsPerMinute) || (self.requestsPerMinute >= 1 && self.requestsPerMinute <= 10000000)',
      message: 'limits.requestsPerMinute must be between 1 and 10000000 (leave it out for no limit)',
      fieldPath: '.requestsPerMinute',
      check: (s) =>
        s.requestsPerMinute === undefined || (s.requestsPerMinute >= 1 && s.requestsPerMinute <= 10_000_000),
    },
    {
      cel: '!has(self.tokensPerMinute) || (self.tokensPerMinute >= 1 && self.tokensPerMinute <= 10000000000)',
      message: 'limits.tokensPerMinute must be between 1 and 10000000000 (leave it out for no limit)',
      fieldPath: '.tokensPerMinute',
      check: (s) =>
        s.tokensPerMinute === undefined || (s.tokensPerMinute >= 1 && s.tokensPerMinute <= 10_000_000_000),
    },
  ],
);
export type TenantLimits = z.infer<typeof TenantLimits>;

export const TenantSpec = withRules(
  z.object({
    apiKeys: z
      .object({
        secretRef: LocalObjectReference.meta({
          description: `A Secret in the Tenant's namespace, labelled ${API_KEYS_LABEL}: "true"; every value in its data is one API key (at least ${MIN_API_KEY_LENGTH} characters). Add a key, move clients, remove the old one: rotation without downtime.`,
        }),
      })
      .meta({ description: "Where the tenant's API keys are." }),
    models: z
      .array(ObjectName)
      .max(256)
      .meta({ description: 'Names of cacheroute Deployments in the same namespace this tenant may call.' }),
    limits: TenantLimits.prefault({}),
    priority: z.number().int().default(0).meta({
      description:
        "Admission order when a deployment's queue is full: higher first (-100..100); a higher arrival displaces the newest lowest waiter.",
    }),
  }),
  [
    {
      cel: 'size(self.models) >= 1',
      message: 'models must name at least one Deployment in this namespace',
      fieldPath: '.models',
      check: (s) => s.models.length >= 1,
    },
    {
      cel: 'self.priority >= -100 && self.priority <= 100',
      message: 'priority must be between -100 and 100',
      fieldPath: '.priority',
      check: (s) => s.priority >= -100 && s.priority <= 100,
    },
  ],
);
export type TenantSpec = z.infer<typeof TenantSpec>;

export const TenantStatus = z.object({
  observedGeneration: z.number().int().optional(),
  conditions: Conditions.optional(),
});
export type TenantStatus = z.infer<typeof TenantStatus>;
