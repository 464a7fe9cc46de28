// A Tenant: who may call the gateway (API keys in a Secret), which models,
// how often, and how important its requests are when queues are full.
// ADR 0007 says why this is a kind of its own and not a CachePolicy section.
import { z } from 'zod';
import { Conditions, LocalObjectReference, ObjectName } from './common.ts';

/** The label a key Secret carries: the gateway watches only labelled Secrets (ADR 0007). */
export const API_KEYS_LABEL = 'cacheroute.dev/api-keys';
/** Shorter keys are refused: a key is a bearer secret and must not be guessable. */
export const MIN_API_KEY_LENGTH = 32;

export const TenantLimits = z
  .object({
    requestsPerMinute: z
      .number()
      .int()
      .min(1, 'limits.requestsPerMinute must be between 1 and 10000000 (leave it out for no limit)')
      .max(10_000_000, 'limits.requestsPerMinute must be between 1 and 10000000 (leave it out for no limit)')
      .optional()
      .meta({
        description: 'Requests per minute across the whole gateway tier; absent = no request limit.',
      }),
    tokensPerMinute: z
      .number()
      .int()
      .min(1, 'limits.tokensPerMinute must be between 1 and 10000000000 (leave it out for no limit)')
      .max(
        10_000_000_000,
        'limits.tokensPerMinute must be between 1 and 10000000000 (leave it out for no limit)',
      )
      .optional()
      .meta({
        description:
          'Prompt plus completion tokens per minute across the whole gateway tier; absent = no token limit.',
      }),
  })
  .meta({
    description: 'Rate limits, over a sliding minute, shared by all gateway replicas (with Redis).',
  });
export type TenantLimits = z.infer<typeof TenantLimits>;

export const TenantSpec = z.object({
  apiKeys: z
    .object({
      secretRef: LocalObjectReference.meta({
        description: `A Secret in the Tenant's namespace, labelled ${API_KEYS_LABEL}: "true"; every value in its data is one API key (at least ${MIN_API_KEY_LENGTH} characters). Add a key, move clients, remove the old one: rotation without downtime.`,
      }),
    })
    .meta({ description: "Where the tenant's API keys are." }),
  models: z
    .array(ObjectName)
    .min(1, 'models must name at least one Deployment in this namespace')
    .max(256)
    .meta({ description: 'Names of cacheroute Deployments in the same namespace this tenant may call.' }),
  limits: TenantLimits.prefault({}),
  priority: z
    .number()
    .int()
    .min(-100, 'priority must be between -100 and 100')
    .max(100, 'priority must be between -100 and 100')
    .default(0)
    .meta({
      description:
        "Admission order when a deployment's queue is full: higher first (-100..100); a higher arrival displaces the newest lowest waiter.",
    }),
});
export type TenantSpec = z.infer<typeof TenantSpec>;

export const TenantStatus = z.object({
  observedGeneration: z.number().int().optional(),
  conditions: Conditions.optional(),
});
export type TenantStatus = z.infer<typeof TenantStatus>;
