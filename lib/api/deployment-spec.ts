// A cacheroute Deployment's spec: one identified, servable model (deploymentId,
// model, runtime) with its scale, resources, scheduling, traffic weight and
// wake-on-demand, and the rules that join its parts. The parts are in
// model-source.ts, runtime-args.ts and deployment-engine.ts.
import { z } from 'zod';
import { Affinity, DnsLabel, Toleration } from './common.ts';
import {
  Disaggregation,
  engineRules,
  HiCacheSpec,
  HiSparseSpec,
  Parallelism,
  Profile,
  RadixCache,
  Resources,
  RuntimeEvents,
  ServingSettings,
} from './deployment-engine.ts';
import { HISPARSE_FAMILIES, ModelSpec } from './model-source.ts';
import { RuntimeSpec, SGLANG_VERSION } from './runtime-args.ts';
import { withRules, type TransitionRule } from './rules.ts';

export const Scheduling = z
  .object({
    nodeSelector: z.record(z.string(), z.string()).optional(),
    tolerations: z.array(Toleration).max(32).optional(),
    affinity: Affinity.optional(),
    priorityClassName: z.string().max(253).optional(),
  })
  .meta({ description: 'Pod scheduling, passed to every replica.' });

const hasHiSparse = (s: {
  profile?: Profile | undefined;
  disaggregation?: { decode: { profile: Profile } } | undefined;
}): boolean => s.profile === 'hisparse' || s.disaggregation?.decode.profile === 'hisparse';

const HISPARSE_FAMILY_LIST = HISPARSE_FAMILIES.map((f) => `'${f}'`).join(', ');

interface IdentityFields {
  deploymentId: string;
  model: { digest: string; tokenizerDigest: string };
  runtime: { image: string };
}

/** Weights, tokenizer and image are identity: the API server refuses to change them under the same deploymentId. */
export const deploymentIdentityRule: TransitionRule<IdentityFields> = {
  cel: 'self.deploymentId != oldSelf.deploymentId || (self.model.digest == oldSelf.model.digest && self.model.tokenizerDigest == oldSelf.model.tokenizerDigest && self.runtime.image == oldSelf.runtime.image)',
  message:
    'model.digest, model.tokenizerDigest and runtime.image are part of the identity: change deploymentId in the same update',
  check: (s, o) =>
    s.deploymentId !== o.deploymentId ||
    (s.model.digest === o.model.digest &&
      s.model.tokenizerDigest === o.model.tokenizerDigest &&
      s.runtime.image === o.runtime.image),
};

export const WakeSettings = z
  .object({
    replicas: z.number().int().min(1).max(64).default(1).meta({
      description: 'Replicas while awake; with disaggregation, of each part (the pair wakes as one).',
    }),
    idleSeconds: z
      .number()
      .int()
      .min(30)
      .max(86_400)
      .default(900)
      .meta({ description: 'Back to 0 after this long with no request held or in flight.' }),
    holdSeconds: z.number().int().min(1).max(900).default(300).meta({
      description:
        'How long the gateway holds a request while the Deployment wakes (model load included); then 503 with Retry-After.',
    }),
  })
  .meta({ description: 'How a Deployment with wakeOnDemand wakes and sleeps.' });
export type WakeSettings = z.infer<typeof WakeSettings>;

/**
 * Wakes on demand and is declared asleep: replicas 0, or with disaggregation both parts at 0 (a
 * pair with one part at 0 is not routable and is not woken). What the gateway holds requests for
 * and what the operator's wake follows (ADR 0014).
 */
export function declaresSleep(spec: {
  readonly wakeOnDemand?: boolean | undefined;
  readonly replicas?: number | undefined;
  readonly disaggregation?:
    | { readonly prefill: { readonly replicas: number }; readonly decode: { readonly replicas: number } }
    | undefined;
}): boolean {
  if (spec.wakeOnDemand !== true) return false;
  const d = spec.disaggregation;
  return d ? d.prefill.replicas === 0 && d.decode.replicas === 0 : spec.replicas === 0;
}

export const DeploymentSpec = withRules(
  z
    .object({
      deploymentId: DnsLabel.meta({
        description:
          'Asserted identity. Change it when weights, tokenizer, runtime build or relevant serving configuration change.',
      }),
      model: ModelSpec,
      runtime: RuntimeSpec,
      replicas: z.number().int().min(0).max(1024).optional().meta({
        description: 'Standalone replicas (default 1; the scale subresource). Unset with disaggregation.',
      }),
      profile: Profile.optional().meta({
        description: 'Standalone KV-cache profile (default dense). Unset with disaggregation.',
      }),
      radixCache: RadixCache.optional(),
      hicache: HiCacheSpec.optional(),
      hisparse: HiSparseSpec.optional(),
      disaggregation: Disaggregation.optional(),
      events: RuntimeEvents.optional(),
      parallelism: Parallelism.prefault({}),
      resources: Resources.prefault({}),
      scheduling: Scheduling.optional(),
      traffic: z
        .object({
          weight: z
            .number()
            .int()
            .min(0)
            .max(1000)
            .meta({
              description:
                "This Deployment's share of its served name, against the other Deployments of this namespace that " +
                'serve the same name and set a weight (0: none; 0..1000). Not identity: changing it rolls no pod.',
            }),
        })
        .optional()
        .meta({
          description:
            'Split a served name across identities (ADR 0008): set a weight on every Deployment that serves it, ' +
            'then move the weights (0 -> 10 -> 100) to roll traffic to a new deploymentId.',
        }),
      wakeOnDemand: z
        .boolean()
        .optional()
        .meta({
          description:
            'With replicas 0 (disaggregation: prefill.replicas and decode.replicas 0): a request to this Deployment wakes it. The gateway holds the request (wake.holdSeconds) ' +
            'while the operator runs wake.replicas, and scales back to 0 after wake.idleSeconds without requests. ' +
            'With disaggregation: both parts at replicas 0, and both wake and sleep together. Not identity.',
        }),
      wake: WakeSettings.optional(),
      serving: ServingSettings.optional().meta({
        description:
          'Serving settings common to every engine of this deployment; they take part in identity.',
      }),
    })
    .meta({ description: 'An identified SGLang deployment with a declared KV-cache profile.' }),
  [
    ...engineRules,
    {
      cel: "!has(self.profile) || self.profile != 'hisparse' || has(self.disaggregation)",
      message: `profile hisparse runs only on the decode part of a prefill/decode deployment (a cacheroute policy, ADR 0005; SGLang ${SGLANG_VERSION} itself would start it standalone): set spec.disaggregation with decode.profile: hisparse`,
      fieldPath: '.profile',
      check: (s) => s.profile !== 'hisparse' || s.disaggregation !== undefined,
    },
    {
      cel: '!has(self.disaggregation) || (!has(self.replicas) && !has(self.profile) && !has(self.hicache) && !has(self.hisparse) && !has(self.radixCache))',
      message:
        'with spec.disaggregation set replicas, profile, radixCache, hicache and hisparse under disaggregation.prefill and disaggregation.decode, not at the top of spec',
      check: (s) =>
        s.disaggregation === undefined ||
        [s.replicas, s.profile, s.hicache, s.hisparse, s.radixCache].every((x) => x === undefined),
    },
    {
      cel: `!((has(self.profile) && self.profile == 'hisparse') || (has(self.disaggregation) && self.disaggregation.decode.profile == 'hisparse')) || (has(self.model.family) && self.model.family in [${HISPARSE_FAMILY_LIST}])`,
      message: `HiSparse supports only DeepSeek sparse-attention (DeepSeek V3.2, GLM-5), DeepSeek V4 and MiniMax M3 models in SGLang ${SGLANG_VERSION}: set model.family to one of ${HISPARSE_FAMILIES.join(', ')}`,
      fieldPath: '.model.family',
      check: (s) =>
        !hasHiSparse(s) || (HISPARSE_FAMILIES as readonly string[]).includes(s.model.family ?? ''),
    },
    {
      cel: `!((has(self.profile) && self.profile == 'hisparse') || (has(self.disaggregation) && self.disaggregation.decode.profile == 'hisparse')) || !has(self.runtime.extraArgs) || !self.runtime.extraArgs.exists(a, a == '--enable-mixed-chunk')`,
      message: `SGLang ${SGLANG_VERSION} does not run HiSparse with --enable-mixed-chunk: remove it from runtime.extraArgs`,
      fieldPath: '.runtime.extraArgs',
      check: (s) => !hasHiSparse(s) || !(s.runtime.extraArgs ?? []).includes('--enable-mixed-chunk'),
    },
    {
      cel: '!has(self.wakeOnDemand) || !self.wakeOnDemand || !has(self.disaggregation) || ((self.disaggregation.prefill.replicas == 0) == (self.disaggregation.decode.replicas == 0))',
      message:
        'wakeOnDemand wakes a prefill/decode pair from 0 and 0 (a pair with one part at 0 is never routable, and waking the other part alone would not make it so): set disaggregation.prefill.replicas and disaggregation.decode.replicas both to 0, or both above 0',
      fieldPath: '.wakeOnDemand',
      check: (s) =>
        s.wakeOnDemand !== true ||
        s.disaggregation === undefined ||
        (s.disaggregation.prefill.replicas === 0) === (s.disaggregation.decode.replicas === 0),
    },
    {
      cel: '!has(self.resources.gpus) || self.resources.gpus * self.parallelism.nodes >= self.parallelism.tensor',
      message:
        'resources.gpus must be at least parallelism.tensor / parallelism.nodes (each tensor-parallel rank needs its own GPU; gpus are per pod, a replica has parallelism.nodes pods)',
      fieldPath: '.resources.gpus',
      check: (s) =>
        s.resources.gpus === undefined || s.resources.gpus * s.parallelism.nodes >= s.parallelism.tensor,
    },
    {
      cel: ['prefill', 'decode']
        .map(
          (part) =>
            `(!has(self.disaggregation) || !has(self.disaggregation.${part}.resources) || !has(self.disaggregation.${part}.resources.gpus) || self.disaggregation.${part}.resources.gpus * self.parallelism.nodes >= self.parallelism.tensor)`,
        )
        .join(' && '),
      message:
        'disaggregation.prefill/decode resources.gpus must be at least parallelism.tensor / parallelism.nodes (gpus are per pod)',
      check: (s) =>
        s.disaggregation === undefined ||
        [s.disaggregation.prefill, s.disaggregation.decode].every(
          (p) =>
            p.resources?.gpus === undefined || p.resources.gpus * s.parallelism.nodes >= s.parallelism.tensor,
        ),
    },
  ],
  [deploymentIdentityRule],
);
export type DeploymentSpec = z.infer<typeof DeploymentSpec>;
