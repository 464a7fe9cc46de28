import { z } from 'zod';
import { Conditions, ConfigMapKeySelector, DnsLabel, ObjectName } from './common.ts';
import { withRules } from './rules.ts';

export const TargetRef = withRules(
  z.object({
    group: z.string().max(253).default('cacheroute.dev').meta({ description: 'API group of the target.' }),
    kind: z.string().min(1).max(63).meta({ description: 'Kind of the target: Deployment.' }),
    name: ObjectName.meta({ description: 'Name of the target Deployment in the same namespace.' }),
  }),
  [
    {
      cel: "self.group == 'cacheroute.dev' && self.kind == 'Deployment'",
      message:
        'targetRefs may name only cacheroute.dev Deployments (group: cacheroute.dev, kind: Deployment)',
      check: (s) => s.group === 'cacheroute.dev' && s.kind === 'Deployment',
    },
  ],
);

export const RoutingPolicyName = z.enum(['cache-aware', 'prefix-hash', 'least-load', 'round-robin']);
export type RoutingPolicyName = z.infer<typeof RoutingPolicyName>;

/**
 * Set from the virtual-time bench (test/bench/bench-virtual.ts --sweep-decode); see adr/ on shared load.
 * 8 since the decode load counts only tokens still to stream (about half the predicted output of a
 * running request): twice the weight keeps the pull it had (ADR 0036).
 */
const DECODE_WEIGHT_DEFAULT = 8;

export const CacheAwareSettings = z
  .object({
    matchThreshold: z
      .number()
      .min(0, 'cacheAware.matchThreshold must be between 0 and 1')
      .max(1, 'cacheAware.matchThreshold must be between 0 and 1')
      .default(0.3)
      .meta({ description: 'Minimum matched fraction of the prompt for cache affinity to win (0..1).' }),
    balanceAbsThreshold: z
      .number()
      .int()
      .min(0, 'cacheAware.balanceAbsThreshold must be 0 or more')
      .default(64)
      .meta({ description: 'Load gap (requests) above which the least-loaded endpoint wins.' }),
    balanceRelThreshold: z
      .number()
      .min(1, 'cacheAware.balanceRelThreshold must be at least 1 (it is a max/min load ratio)')
      .default(1.5)
      .meta({ description: 'Load ratio (max/min, >= 1) above which the least-loaded endpoint wins.' }),
    maxTreeTokens: z
      .number()
      .int()
      .min(1024, 'cacheAware.maxTreeTokens must be at least 1024')
      .default(16777216)
      .meta({
        description: 'Bound of each endpoint prefix tree, in tokens; least recently used leaves go first.',
      }),
    blockTokens: z
      .number()
      .int()
      .min(1, 'cacheAware.blockTokens must be between 1 and 4096')
      .max(4096, 'cacheAware.blockTokens must be between 1 and 4096')
      .default(16)
      .meta({ description: 'Tokens per block the tree matches on (1..4096).' }),
    costWeight: z
      .number()
      .min(0, 'cacheAware.costWeight must be 0 or more')
      .default(64)
      .meta({
        description:
          'Cost routing: the endpoint with the least (prefill tokens it has not started + costWeight x this ' +
          'prompt tokens it does not hold) wins; 0 = threshold routing (matchThreshold, then least loaded).',
      }),
    decodeWeight: z
      .number()
      .min(0, 'cacheAware.decodeWeight must be 0 or more')
      .default(DECODE_WEIGHT_DEFAULT)
      .meta({
        description:
          'Cost routing weighs decode too: costWeight x uncached prompt tokens + prefill backlog + decodeWeight x ' +
          'output tokens the endpoint still has to generate (predicted from max_tokens and the usual output) + the pause ' +
          "this request's prefill puts on the requests decoding there, so requests finish sooner, not only start " +
          'sooner; 0 = prefill only.',
      }),
    hostWeight: z
      .number()
      .min(0, 'cacheAware.hostWeight must be between 0 and 1')
      .max(1, 'cacheAware.hostWeight must be between 0 and 1')
      .default(0.5)
      .meta({
        description:
          "What a prefix held in a runtime's host memory (HiCache) is worth against one held on the GPU " +
          '(0..1; it is loaded back before use); a shared L3 (storage) tier counts storageWeight, by default as much. ' +
          '1 ignores the host tier.',
      }),
    storageWeight: z
      .number()
      .min(0, 'cacheAware.storageWeight must be between 0 and 1')
      .max(1, 'cacheAware.storageWeight must be between 0 and 1')
      .optional()
      .meta({
        description:
          "What a prefix in a Deployment's shared HiCache L3 tier is worth against one on the GPU (0..1; it is " +
          'read from storage into host memory, then loaded back). It is credited on every replica that shares the ' +
          'tier. Unset: hostWeight (0.5 with the defaults): on the real SGLang an L3 load cost what a host load ' +
          'did, both far below recomputing (docs/l3-timing.md).',
      }),
  })
  .meta({ description: 'Settings of the cache-aware policy.' });
export const PrefixHashSettings = z
  .object({
    prefixBlocks: z
      .number()
      .int()
      .min(1, 'prefixHash.prefixBlocks must be between 1 and 1024')
      .max(1024, 'prefixHash.prefixBlocks must be between 1 and 1024')
      .default(16)
      .meta({
        description:
          'Leading blocks hashed to choose the endpoint; cover more than the prefix all requests share.',
      }),
    blockTokens: z
      .number()
      .int()
      .min(1, 'prefixHash.blockTokens must be between 1 and 4096')
      .max(4096, 'prefixHash.blockTokens must be between 1 and 4096')
      .default(64)
      .meta({ description: 'Tokens per hashed block.' }),
    loadFactor: z
      .number()
      .gt(1, 'prefixHash.loadFactor must be above 1 and at most 10')
      .max(10, 'prefixHash.loadFactor must be above 1 and at most 10')
      .default(1.25)
      .meta({
        description: 'Bounded load: an endpoint takes at most loadFactor x mean in-flight requests (> 1).',
      }),
  })
  .meta({ description: 'Settings of the prefix-hash policy.' });
export const RoutingSettings = z
  .object({
    policy: RoutingPolicyName.default('cache-aware'),
    cacheAware: CacheAwareSettings.prefault({}),
    prefixHash: PrefixHashSettings.prefault({}),
  })
  .meta({ description: 'How the gateway picks an endpoint.' });

export const REUSABLE_SAMPLING = ['temperatureZero', 'fixedSeed'] as const;

export const ResultReuse = z
  .object({
    enabled: z.boolean().default(false),
    ttlSeconds: z
      .number()
      .int()
      .min(1, 'resultReuse.ttlSeconds must be between 1 and 604800 (7 days)')
      .max(604_800, 'resultReuse.ttlSeconds must be between 1 and 604800 (7 days)')
      .default(3600)
      .meta({ description: 'How long a completed result may be reused.' }),
    maxEntries: z
      .number()
      .int()
      .min(1, 'resultReuse.maxEntries must be between 1 and 10000000')
      .max(10_000_000, 'resultReuse.maxEntries must be between 1 and 10000000')
      .default(10000)
      .meta({ description: 'Bound of the result store.' }),
    reusableWhen: z.array(z.enum(REUSABLE_SAMPLING)).max(2).default(['temperatureZero']).meta({
      description:
        'Sampling that makes a result reusable: temperatureZero (greedy), fixedSeed (a seed is given).',
    }),
  })
  .meta({ description: 'Exact completed-result reuse at the gateway.' });
export const Admission = z
  .object({
    maxConcurrency: z
      .number()
      .int()
      .min(1, 'admission.maxConcurrency must be between 1 and 100000')
      .max(100_000, 'admission.maxConcurrency must be between 1 and 100000')
      .default(64)
      .meta({
        description:
          'In-flight requests per deployment before queueing, for the whole gateway tier (each replica takes a share).',
      }),
    maxQueue: z
      .number()
      .int()
      .min(0, 'admission.maxQueue must be between 0 and 1000000')
      .max(1_000_000, 'admission.maxQueue must be between 0 and 1000000')
      .default(256)
      .meta({ description: 'Queued requests per deployment before 429, for the whole gateway tier.' }),
    queueTimeoutSeconds: z
      .number()
      .gt(0, 'admission.queueTimeoutSeconds must be above 0 and at most 3600')
      .max(3600, 'admission.queueTimeoutSeconds must be above 0 and at most 3600')
      .default(30)
      .meta({ description: 'Longest wait in the queue before 503.' }),
    adaptive: z
      .boolean()
      .default(true)
      .meta({ description: 'Lower concurrency when upstream latency or queues climb.' }),
  })
  .meta({ description: 'Admission control per deployment.' });
export const DEFAULT_ROUTE_AFTER_SECONDS = 120;

export const Warmup = z
  .object({
    documents: z
      .array(ConfigMapKeySelector)
      .min(1)
      .max(64)
      .meta({
        description:
          'ConfigMap keys whose text is prefilled on every new verified replica (and again after its ' +
          'container restarts), each as the system message of a chat request, rendered by the ' +
          "runtime's own chat template. Chat requests that start with the same system message " +
          'share its cached prefix. On a Deployment whose HiCache L3 tier is reachable (status.l3), ' +
          'the documents are prefilled once per role and identity into the shared tier and every ' +
          'other replica, later ones and restarted containers too, loads them from there on the first ' +
          'request that carries them. A chat template that writes the date (or anything per request) ' +
          'before the system message changes the prefix: the warm-up warns (WarmupPrefixVaries).',
      }),
    routeAfterSeconds: z
      .number()
      .int()
      .min(0, 'warmup.routeAfterSeconds must be between 0 and 3600')
      .max(3600, 'warmup.routeAfterSeconds must be between 0 and 3600')
      .default(DEFAULT_ROUTE_AFTER_SECONDS)
      .meta({
        description:
          'How long the gateway keeps user traffic off a replica whose warm-up has not completed, ' +
          'counted from when the operator first saw it serving (0..3600; 0: never wait). After it the ' +
          'gateway routes to the replica anyway and says so on /status. A model none of whose ' +
          'replicas is warmed is never held back.',
      }),
  })
  .meta({ description: 'Prefill shared documents into each new replica before traffic.' });
/**
 * Request fields SGLang 0.5.23 takes from any client (its request models) that are the operator's
 * to set: each reaches past what a tenant's own request should decide.
 */
export const PRIVILEGED_REQUEST_FIELDS = [
  /** Code the runtime deserialises and runs inside its sampler (with --enable-custom-logit-processor). */
  'custom_logit_processor',
  /** The runtime's scheduling order across every tenant (with --enable-priority-scheduling). */
  'priority',
  /** The runtime's request id: a client's can collide with another request's, which the runtime refuses or aborts. */
  'rid',
  /** Pins the request to one data-parallel rank, around the gateway's balancing. */
  'routed_dp_rank',
  /** The deprecated spelling of routed_dp_rank. */
  'data_parallel_rank',
  /** Which prefill rank a decode server reads KV from (prefill/decode pairs). */
  'disagg_prefill_dp_rank',
  /** Hints to the KV storage backends: SGLang takes them from a trusted orchestrator, never a client. */
  'kv_hints',
  /** Encoder servers the runtime posts to (encode/prefill/decode disaggregation): a server-side request. */
  'encoder_urls',
  /** The model's hidden states in the answer: memory per token on the runtime, and its internals out. */
  'return_hidden_states',
  /** The experts each token was routed to (MoE): the runtime's internals, captured per token. */
  'return_routed_experts',
  /** The sparse-attention indexer's top-k per token: the runtime's internals, captured per token. */
  'return_indexer_topk',
  /** A runtime session (opened by the operator, shared by every tenant): its context, around the cache salt. */
  'session_params',
  /** A radix-native session's id: another tenant's, guessed, continues its context. */
  'session_id',
  /** The runtime's own adapter id, which bypasses its lookup and reference count (lora_path names one). */
  'lora_id',
  /** Labels on the runtime's metrics, chosen by the client: a series per value. */
  'custom_labels',
  /** false keeps the request out of the runtime's metrics and request dumps. */
  'log_metrics',
  /** true asks the runtime not to log the request (inert in SGLang 0.5.23). */
  'no_logs',
] as const;
export type PrivilegedRequestField = (typeof PRIVILEGED_REQUEST_FIELDS)[number];

export const DEFAULT_MAX_BATCH_SIZE = 256;
export const DEFAULT_MAX_N = 16;

export const RequestRules = z
  .object({
    maxBatchSize: z
      .number()
      .int()
      .min(1)
      .max(1024)
      .default(DEFAULT_MAX_BATCH_SIZE)
      .meta({
        description:
          'Most prompts in one batch request (/generate `text` or `input_ids` as a list, /v1/completions ' +
          '`prompt` as a list); the runtime serves each as a request of its own.',
      }),
    maxN: z
      .number()
      .int()
      .min(1)
      .max(128)
      .default(DEFAULT_MAX_N)
      .meta({
        description:
          "Largest `n` (sequences sampled per prompt: `n`, or `sampling_params.n` on /generate); a tenant's " +
          'requestsPerMinute counts prompts x n.',
      }),
    allowPrivilegedFields: z
      .array(z.enum(PRIVILEGED_REQUEST_FIELDS))
      .max(PRIVILEGED_REQUEST_FIELDS.length)
      .default([])
      .meta({
        description:
          "Request fields that are the operator's by default and that clients may set here: " +
          'custom_logit_processor (code the runtime runs), priority (its queue order across tenants), ' +
          'rid (its request id), routed_dp_rank, data_parallel_rank and disagg_prefill_dp_rank (rank ' +
          'pinning), kv_hints (KV storage hints), encoder_urls (servers it posts to), ' +
          'return_hidden_states, return_routed_experts and return_indexer_topk (its internals, memory per ' +
          'token), session_params and session_id (runtime sessions shared across tenants), lora_id (its ' +
          'internal adapter id; lora_path is allowed), custom_labels (series on its metrics), log_metrics ' +
          'false and no_logs true (out of its metrics and logs). Others get a 400 that names the field; a ' +
          "field at SGLang's default (null, false, log_metrics true) is not checked.",
      }),
    allowMediaUrls: z
      .boolean()
      .default(false)
      .meta({
        description:
          'Let clients give media by reference (an http(s) URL, a file:// URL or a path in chat ' +
          '`image_url`/`video_url`/`audio_url` parts, or /generate `image_data`/`video_data`/' +
          '`audio_data`), which the runtime fetches or reads itself from inside the cluster. false: only ' +
          'inline `data:` URLs are accepted, others get a 400.',
      }),
  })
  .meta({ description: 'What one request may ask of the runtime.' });
export type RequestRules = z.output<typeof RequestRules>;

/** What a GIE gateway does with a request when the endpoint picker does not answer (InferencePool v1). */
export const PickerFailureMode = z.enum(['FailClose', 'FailOpen']);
export type PickerFailureMode = z.infer<typeof PickerFailureMode>;

export const InferencePoolSettings = z
  .object({
    failureMode: PickerFailureMode.default('FailClose').meta({
      description:
        "The InferencePool's endpointPickerRef.failureMode, for a Gateway API Inference Extension gateway: " +
        'FailClose (the default): a request the picker cannot place gets an error; FailOpen: the gateway ' +
        'picks a pool pod itself, so the request passes without the picker (no tenant key check, no ' +
        'cache_salt, no admission, any pod of the pool, verified or not). FailOpen needs ' +
        'tenancy.sharePrefixes: true.',
    }),
  })
  .meta({
    description:
      "The InferencePool the operator keeps for each target when it runs with the chart's picker " +
      '(gateway.mode picker or both) and the cluster serves inference.networking.k8s.io/v1.',
  });

export const CachePolicySpec = withRules(
  z.object({
    targetRefs: z
      .array(TargetRef)
      .min(1, 'targetRefs must name at least one Deployment')
      .max(16)
      .meta({ description: 'Deployments this policy attaches to.' }),
    cacheNamespace: DnsLabel.meta({
      description:
        'Hashed with each target deploymentId into the SGLang cache_salt. It separates cache keys; it grants no access.',
    }),
    routing: RoutingSettings.prefault({}),
    resultReuse: ResultReuse.prefault({}),
    admission: Admission.prefault({}),
    warmup: Warmup.optional(),
    requests: RequestRules.prefault({}),
    tenancy: z
      .object({
        sharePrefixes: z
          .boolean()
          .default(false)
          .meta({
            description:
              "false: each Tenant's requests carry a salt of their own, so tenants never share cached prefixes or " +
              'reused results (nor warm-up documents); true: all tenants share them, as requests without a tenant do.',
          }),
      })
      .prefault({})
      .meta({ description: 'What tenants of the gateway share on these Deployments.' }),
    inferencePool: InferencePoolSettings.prefault({}),
  }),
  [
    {
      // A request the gateway lets past a picker outage carries no tenant's cache_salt: tenants
      // whose prefixes this policy keeps apart would share them.
      cel:
        "!has(self.inferencePool) || !has(self.inferencePool.failureMode) || self.inferencePool.failureMode != 'FailOpen' || " +
        '(has(self.tenancy) && has(self.tenancy.sharePrefixes) && self.tenancy.sharePrefixes)',
      message:
        "inferencePool.failureMode FailOpen sends requests past the picker without their tenant's cache_salt: " +
        'set tenancy.sharePrefixes: true, or use FailClose',
      fieldPath: '.inferencePool.failureMode',
      check: (s) => s.inferencePool.failureMode !== 'FailOpen' || s.tenancy.sharePrefixes,
    },
  ],
);
export type CachePolicySpec = z.infer<typeof CachePolicySpec>;

export const WarmupState = z.enum(['Pending', 'Warming', 'Warmed', 'Failed']);
export type WarmupState = z.infer<typeof WarmupState>;

export const WarmupSource = z.enum(['prefill', 'storage']);
export type WarmupSource = z.infer<typeof WarmupSource>;

/** Documents prefilled once into a role's shared L3 tier (ADR 0042). */
export const KnowledgeDelivery = z.object({
  role: z.string().meta({ description: 'The role whose L3 tier holds them (standalone or prefill).' }),
  fingerprint: z.string().meta({ description: 'The identity fingerprint: its L3 directory.' }),
  pod: z.string().meta({ description: 'The instance that prefilled them.' }),
  restartCount: z.number().int(),
  deliveredAt: z.string(),
  cacheSalt: z.string().meta({ description: 'The salt they were prefilled under.' }),
  rendered: z.string().meta({
    description:
      'sha256 of the token ids the runtime rendered the documents to: a replica whose rendering differs (a date in the chat template, another tokenizer) is prefilled again.',
  }),
  tokens: z
    .number()
    .int()
    .meta({ description: "Prompt tokens of the documents' warm-up requests, all together." }),
  storedTokens: z.number().int().meta({
    description:
      'Tokens the L3 tier confirmed: the runtime backed them up to storage (sglang:backuped_tokens_total) or found them cached already.',
  }),
});
export type KnowledgeDelivery = z.infer<typeof KnowledgeDelivery>;

export const WarmupEndpointStatus = z.object({
  pod: z.string(),
  restartCount: z
    .number()
    .int()
    .meta({ description: "The pod's container restarts when it was warmed: with the pod, the instance." }),
  state: WarmupState.meta({
    description:
      'Pending (waiting: documents or a decode partner), Warming (requests in flight), Warmed, Failed (retried with backoff).',
  }),
  since: z.string().meta({
    description: 'When warm-up of this instance became due; the gateway counts routeAfterSeconds from it.',
  }),
  warmedAt: z.string().optional(),
  source: WarmupSource.optional().meta({
    description:
      "prefill: this instance computed the documents; storage: it was not prefilled, the documents are in the Deployment's shared L3 tier (status.targets[].delivered) and it loads them on first use.",
  }),
  attempts: z.number().int().optional().meta({ description: 'Failed attempts so far.' }),
  message: z.string().optional(),
});
export type WarmupEndpointStatus = z.infer<typeof WarmupEndpointStatus>;

export const PolicyTargetStatus = z.object({
  name: z.string(),
  accepted: z.boolean(),
  reason: z.string(),
  message: z.string().optional(),
  deploymentId: z.string().optional(),
  fingerprint: z.string().optional(),
  cacheSalt: z
    .string()
    .optional()
    .meta({ description: 'The cache_salt the gateway stamps on requests to this target.' }),
  hitRate: z.number().optional().meta({
    description:
      "The target's cache hit rate over its last window, as its runtimes report it (its status.cache).",
  }),
  warmup: z
    .array(WarmupEndpointStatus)
    .optional()
    .meta({
      description:
        "Warm-up of the target's prefilling endpoints, one entry per container instance (pod and " +
        'restart count): a restarted container is a new entry, warmed again (or, with a shared L3 ' +
        'tier, marked source storage).',
    }),
  delivered: z
    .array(KnowledgeDelivery)
    .optional()
    .meta({
      description:
        "The documents prefilled once into the target's shared HiCache L3 tier, per role and identity: " +
        'replicas of that identity load them from there instead of being prefilled.',
    }),
});

export const CachePolicyStatus = z.object({
  observedGeneration: z.number().int().optional(),
  conditions: Conditions.optional(),
  targets: z.array(PolicyTargetStatus).optional(),
});
export type CachePolicyStatus = z.infer<typeof CachePolicyStatus>;
