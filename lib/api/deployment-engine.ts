// How SGLang serves a Deployment's model: the KV-cache profile (dense, HiCache,
// HiSparse), prefill/decode disaggregation, parallelism, serving settings and
// event streams. Each renders to SGLang launch flags; their choice lists come
// from the pinned flag table through runtime-args.ts.
import { z } from 'zod';
import { ObjectName, Quantity } from './common.ts';
import { SGLANG_CHOICES, SGLANG_VERSION } from './runtime-args.ts';
import { withRules, type Rule } from './rules.ts';

export const Profile = z.enum(['dense', 'hicache', 'hisparse']).meta({
  description:
    'KV-cache profile: dense (radix cache on the GPU), hicache (GPU + host tiers), hisparse (sparse decode with host KV).',
});
export type Profile = z.infer<typeof Profile>;

export const RadixCache = z.enum(['enabled', 'disabled']).meta({
  description: "Prefix (radix) cache. Unset: SGLang's default for the role (on, except on decode).",
});

/**
 * The shared volume of HiCache's `file` backend: a claim the user names, or one the operator
 * makes (ReadWriteMany, owned by the Deployment). Every replica mounts it; SGLang's keys are
 * page hashes salted with the request's cache_salt, so tenants stay apart in one directory.
 */
export const L3Volume = withRules(
  z
    .object({
      claimName: ObjectName.optional().meta({
        description:
          'An existing ReadWriteMany PersistentVolumeClaim in this namespace (you need create on pods here, or the verb use on it).',
      }),
      size: Quantity.optional().meta({ description: 'Storage the operator claims (default 100Gi).' }),
      storageClassName: z
        .string()
        .min(1)
        .max(253)
        .optional()
        .meta({ description: "The class of the claim the operator makes; unset: the cluster's default." }),
    })
    .meta({ description: 'The L3 volume of the file backend.' }),
  [
    {
      cel: '!has(self.claimName) || (!has(self.size) && !has(self.storageClassName))',
      message:
        'hicache.storage.volume: claimName names a claim you made, size and storageClassName shape the one the operator makes: keep one or the other',
      check: (v) => v.claimName === undefined || (v.size === undefined && v.storageClassName === undefined),
    },
  ],
);

/** The bounds of a Mooncake store's memory segment (binary units only: what a memory limit says). */
export const MOONCAKE_CAPACITY_MIN = '64Mi';
export const MOONCAKE_CAPACITY_MAX = '1Ti';
export const DEFAULT_MOONCAKE_CAPACITY = '4Gi';
const BINARY_QUANTITY = /^([1-9][0-9]{0,6})(Mi|Gi|Ti)$/;
const BINARY_SHIFT: Readonly<Record<string, number>> = { Mi: 20, Gi: 30, Ti: 40 };

/** Bytes of a `<n>Mi|Gi|Ti` quantity; undefined for any other spelling. */
export function parseBinaryQuantity(q: string): number | undefined {
  const m = BINARY_QUANTITY.exec(q);
  if (!m) return undefined;
  return Number(m[1]) * 2 ** (BINARY_SHIFT[m[2] ?? ''] ?? 0);
}

/**
 * HiCache's `mooncake` backend: a Mooncake store the operator runs for the Deployment (ADR 0041),
 * a `mooncake_master` and one store node holding `capacity` of memory. No field names a master:
 * Mooncake has no authentication, so only the operator points replicas at a store.
 */
export const MooncakeStoreSpec = withRules(
  z
    .object({
      capacity: z
        .string()
        .regex(BINARY_QUANTITY, 'hicache.storage.mooncake.capacity: a whole number of Mi, Gi or Ti, e.g. 4Gi')
        .optional()
        .meta({
          description: `Memory of the store's segment, where the KV lives (default ${DEFAULT_MOONCAKE_CAPACITY}, ${MOONCAKE_CAPACITY_MIN} to ${MOONCAKE_CAPACITY_MAX}); the store node requests and is limited to it plus its own overhead.`,
        }),
    })
    .meta({ description: 'backend mooncake: the Mooncake store the operator runs for the replicas.' }),
  [
    {
      cel: `!has(self.capacity) || (quantity(self.capacity).compareTo(quantity('${MOONCAKE_CAPACITY_MIN}')) >= 0 && quantity(self.capacity).compareTo(quantity('${MOONCAKE_CAPACITY_MAX}')) <= 0)`,
      message: `hicache.storage.mooncake.capacity must be between ${MOONCAKE_CAPACITY_MIN} and ${MOONCAKE_CAPACITY_MAX}`,
      fieldPath: '.capacity',
      check: (m) => {
        if (m.capacity === undefined) return true;
        const bytes = parseBinaryQuantity(m.capacity) ?? 0;
        return (
          bytes >= (parseBinaryQuantity(MOONCAKE_CAPACITY_MIN) ?? 0) &&
          bytes <= (parseBinaryQuantity(MOONCAKE_CAPACITY_MAX) ?? 0)
        );
      },
    },
  ],
);

export const HiCacheSpec = withRules(
  z
    .object({
      ratio: z
        .number()
        .gt(1)
        .max(64)
        .optional()
        .meta({ description: 'Host tier size as a multiple of the device KV pool (--hicache-ratio).' }),
      sizeGB: z
        .number()
        .int()
        .min(1)
        .max(65536)
        .optional()
        .meta({ description: 'Host tier size in GB (--hicache-size); overrides ratio.' }),
      hostMemoryMode: z.enum(SGLANG_CHOICES.hicacheHostMemoryMode).optional().meta({
        description:
          '--hicache-host-memory-mode: cache (host memory is a cache tier) or buffer_only (host memory only stages pages to storage; needs storage, not on decode).',
      }),
      writePolicy: z
        .enum(SGLANG_CHOICES.hicacheWritePolicy)
        .optional()
        .meta({ description: '--hicache-write-policy.' }),
      ioBackend: z
        .enum(SGLANG_CHOICES.hicacheIoBackend)
        .optional()
        .meta({ description: '--hicache-io-backend.' }),
      memLayout: z
        .enum(SGLANG_CHOICES.hicacheMemLayout)
        .optional()
        .meta({ description: '--hicache-mem-layout.' }),
      storage: z
        .object({
          backend: z.enum(SGLANG_CHOICES.hicacheStorageBackend).meta({
            description:
              'L3 storage backend (--hicache-storage-backend); the only tier shared across instances.',
          }),
          prefetchPolicy: z
            .enum(SGLANG_CHOICES.hicacheStoragePrefetchPolicy)
            .optional()
            .meta({ description: '--hicache-storage-prefetch-policy.' }),
          extraConfig: z
            .string()
            .max(16384)
            .optional()
            .meta({ description: 'JSON passed as --hicache-storage-backend-extra-config.' }),
          volume: L3Volume.optional().meta({
            description:
              'backend file: the ReadWriteMany volume every replica reads and writes (ADR 0029). Unset: the operator makes a claim of the default size in the cluster default class.',
          }),
          mooncake: MooncakeStoreSpec.optional().meta({
            description:
              'backend mooncake: the store the operator runs, a mooncake_master and a store node per role and identity (ADR 0041). Unset: the default capacity.',
          }),
        })
        .optional()
        .meta({ description: 'Optional L3 storage tier.' }),
    })
    .meta({ description: 'Hierarchical KV cache (HiCache) settings.' }),
  [
    {
      cel: '!(has(self.ratio) && has(self.sizeGB))',
      message: 'set hicache.ratio or hicache.sizeGB, not both (SGLang lets sizeGB override ratio silently)',
      check: (s) => !(s.ratio !== undefined && s.sizeGB !== undefined),
    },
    {
      cel: "!has(self.storage) || !has(self.storage.volume) || self.storage.backend == 'file'",
      message:
        'hicache.storage.volume is the shared directory of the file backend: remove it, or set storage.backend file',
      fieldPath: '.storage.volume',
      check: (s) => s.storage?.volume === undefined || s.storage.backend === 'file',
    },
    {
      cel: "!has(self.storage) || self.storage.backend != 'file' || !has(self.storage.extraConfig) || !self.storage.extraConfig.contains('file_storage_path')",
      message:
        'hicache.storage.extraConfig: the operator mounts the file backend directory on the shared volume; remove file_storage_path and name a claim in storage.volume.claimName instead',
      fieldPath: '.storage.extraConfig',
      check: (s) =>
        s.storage?.backend !== 'file' || !(s.storage.extraConfig ?? '').includes('file_storage_path'),
    },
    {
      cel: "!has(self.storage) || !has(self.storage.mooncake) || self.storage.backend == 'mooncake'",
      message:
        'hicache.storage.mooncake is the store of the mooncake backend: remove it, or set storage.backend mooncake',
      fieldPath: '.storage.mooncake',
      check: (s) => s.storage?.mooncake === undefined || s.storage.backend === 'mooncake',
    },
    {
      cel: "!has(self.storage) || self.storage.backend != 'mooncake' || !has(self.storage.extraConfig) || !(self.storage.extraConfig.contains('master_server_address') || self.storage.extraConfig.contains('client_server_address'))",
      message:
        'hicache.storage.extraConfig: the operator points the replicas at the Mooncake store it runs for them; remove master_server_address and client_server_address (a store elsewhere is not reachable from a Deployment: Mooncake has no authentication)',
      fieldPath: '.storage.extraConfig',
      check: (s) =>
        s.storage?.backend !== 'mooncake' ||
        !/master_server_address|client_server_address/.test(s.storage.extraConfig ?? ''),
    },
    {
      cel: "!has(self.hostMemoryMode) || self.hostMemoryMode != 'buffer_only' || has(self.storage)",
      message:
        'hicache.hostMemoryMode buffer_only keeps no cache in host memory, only pages staged for storage: set hicache.storage or use hostMemoryMode cache (SGLang refuses buffer_only without a storage backend)',
      fieldPath: '.hostMemoryMode',
      check: (s) => s.hostMemoryMode !== 'buffer_only' || s.storage !== undefined,
    },
  ],
);

export const HiSparseSpec = z
  .object({
    topK: z.number().int().min(1).max(65536).optional(),
    deviceBufferSize: z.number().int().min(1).optional(),
    hostToDeviceRatio: z.number().gt(0).max(1024).optional(),
    swapInBlockSize: z.number().int().min(1).max(65536).optional(),
  })
  .meta({ description: 'HiSparse settings, rendered as --hisparse-config JSON.' });

export const Resources = z
  .object({
    gpus: z.number().int().min(0).max(64).optional().meta({
      description:
        'GPUs per pod; defaults to the tensor-parallel size over parallelism.nodes (a replica has one pod a node).',
    }),
    gpuResourceName: z
      .string()
      .min(1)
      .max(253)
      .default('nvidia.com/gpu')
      .meta({ description: 'Extended resource name of the GPU.' }),
    shmSize: Quantity.optional().meta({ description: 'Size of the /dev/shm memory volume (default 16Gi).' }),
    cpu: Quantity.optional().meta({ description: 'CPU request and limit per replica.' }),
    memory: Quantity.optional().meta({ description: 'Memory request and limit per replica.' }),
  })
  .meta({ description: 'Per-replica resources.' });
export type Resources = z.infer<typeof Resources>;

interface EngineFields {
  profile?: Profile | undefined;
  hicache?: unknown;
  hisparse?: unknown;
  radixCache?: 'enabled' | 'disabled' | undefined;
}

/** The rules of one engine (standalone, or one part of a pair): profile, radix cache and tiers agree. */
export const engineRules: Rule<EngineFields>[] = [
  {
    cel: '!(has(self.hicache) && has(self.hisparse))',
    message: 'HiCache and HiSparse cannot be enabled in one engine: keep either hicache or hisparse',
    check: (s) => !(s.hicache !== undefined && s.hisparse !== undefined),
  },
  {
    cel: "!has(self.hicache) || (has(self.profile) && self.profile == 'hicache')",
    message: 'hicache settings apply only with profile: hicache; set the profile or remove hicache',
    check: (s) => s.hicache === undefined || s.profile === 'hicache',
  },
  {
    cel: "!has(self.hisparse) || (has(self.profile) && self.profile == 'hisparse')",
    message: 'hisparse settings apply only with profile: hisparse; set the profile or remove hisparse',
    check: (s) => s.hisparse === undefined || s.profile === 'hisparse',
  },
  {
    cel: "!has(self.profile) || self.profile != 'hisparse' || !has(self.radixCache) || self.radixCache == 'disabled'",
    message: 'profile hisparse needs the radix cache disabled: set radixCache: disabled or leave it unset',
    check: (s) => s.profile !== 'hisparse' || s.radixCache !== 'enabled',
  },
  {
    cel: "!has(self.profile) || self.profile != 'hicache' || !has(self.radixCache) || self.radixCache == 'enabled'",
    message: 'profile hicache extends the radix cache: remove radixCache: disabled or choose profile dense',
    check: (s) => s.profile !== 'hicache' || s.radixCache !== 'disabled',
  },
];

export const DisaggregationPart = withRules(
  z.object({
    replicas: z.number().int().min(0).max(1024).default(1).meta({ description: 'Replicas of this part.' }),
    profile: Profile.default('dense'),
    radixCache: RadixCache.optional(),
    hicache: HiCacheSpec.optional(),
    hisparse: HiSparseSpec.optional(),
    resources: Resources.optional().meta({ description: 'Overrides spec.resources for this part.' }),
  }),
  engineRules,
);
export type DisaggregationPart = z.infer<typeof DisaggregationPart>;

export const Disaggregation = withRules(
  z
    .object({
      transferBackend: z.enum(SGLANG_CHOICES.disaggregationTransferBackend).optional().meta({
        description:
          'KV transfer backend (--disaggregation-transfer-backend); mooncake_tcp runs Mooncake over TCP where there is no RDMA. fake is refused: SGLang does not run a prefill server with it.',
      }),
      bootstrapPort: z
        .number()
        .int()
        .min(1024, 'disaggregation.bootstrapPort must be between 1024 and 65535')
        .max(65535, 'disaggregation.bootstrapPort must be between 1024 and 65535')
        .default(8998)
        .meta({ description: "Prefill server's bootstrap port (--disaggregation-bootstrap-port)." }),
      ibDevice: z
        .string()
        .max(253)
        .optional()
        .meta({ description: 'InfiniBand device (--disaggregation-ib-device).' }),
      prefill: DisaggregationPart.meta({ description: 'The prefill part.' }),
      decode: DisaggregationPart.meta({ description: 'The decode part.' }),
    })
    .meta({
      description:
        'Prefill/decode disaggregation. One resource is one servable model; the gateway pairs its parts.',
    }),
  [
    {
      cel: 'has(self.transferBackend)',
      message: `disaggregation needs transferBackend: one of ${SGLANG_CHOICES.disaggregationTransferBackend
        .filter((b) => b !== 'fake')
        .join(', ')} (mooncake_tcp where there is no RDMA)`,
      check: (s) => s.transferBackend !== undefined,
    },
    {
      cel: "!has(self.transferBackend) || self.transferBackend != 'fake'",
      message: `disaggregation.transferBackend fake moves no KV and SGLang ${SGLANG_VERSION} refuses it on the prefill server: use mooncake_tcp where there is no RDMA, or mooncake, nixl or mori`,
      fieldPath: '.transferBackend',
      check: (s) => s.transferBackend !== 'fake',
    },
    {
      cel: "!has(self.decode.hicache) || !has(self.decode.hicache.hostMemoryMode) || self.decode.hicache.hostMemoryMode != 'buffer_only'",
      message: `decode.hicache.hostMemoryMode buffer_only is refused on decode servers by SGLang ${SGLANG_VERSION}: use hostMemoryMode cache on the decode part (buffer_only is supported on prefill)`,
      fieldPath: '.decode.hicache.hostMemoryMode',
      check: (s) => s.decode.hicache?.hostMemoryMode !== 'buffer_only',
    },
    {
      cel: "self.prefill.profile != 'hisparse'",
      message: `HiSparse runs only on the decode part (a cacheroute policy, ADR 0005; SGLang ${SGLANG_VERSION} itself would start it): set prefill.profile to dense or hicache`,
      fieldPath: '.prefill.profile',
      check: (s) => s.prefill.profile !== 'hisparse',
    },
  ],
);
export type Disaggregation = z.infer<typeof Disaggregation>;

export const RuntimeEvents = withRules(
  z
    .object({
      kvCache: z.boolean().default(false).meta({
        description:
          'Publish KV cache events (blocks stored and removed, per tier) over ZMQ: --kv-events-config with publisher zmq, a replay endpoint and topic kv.',
      }),
      load: z.boolean().default(false).meta({
        description: 'Publish runtime load over ZMQ (--load-publish-endpoint auto); needs kvCache.',
      }),
      port: z.number().int().min(1024).max(65000).default(5557).meta({
        description:
          'First port of the KV events range (one port per data-parallel rank); the replay range follows it, then the load range.',
      }),
    })
    .meta({ description: "The runtime's own event streams, for the gateway's cache index and load view." }),
  [
    {
      cel: '!self.load || self.kvCache',
      message:
        'events.load needs events.kvCache: SGLang advertises the load publisher through the KV events block of /server_info',
      fieldPath: '.load',
      check: (s) => !s.load || s.kvCache,
    },
  ],
);
export type RuntimeEvents = z.infer<typeof RuntimeEvents>;

export const Parallelism = withRules(
  z
    .object({
      tensor: z
        .number()
        .int()
        .min(1)
        .max(64)
        .default(1)
        .meta({ description: 'Tensor-parallel size (--tp-size), across all the nodes of a replica.' }),
      data: z
        .number()
        .int()
        .min(1)
        .max(64)
        .default(1)
        .meta({ description: 'Data-parallel size (--dp-size).' }),
      nodes: z
        .number()
        .int()
        .min(1)
        .max(64)
        .default(1)
        .meta({
          description:
            'Nodes one replica spans (--nnodes). Above 1 a replica is a LeaderWorkerSet group (leaderworkerset.x-k8s.io/v1, ' +
            'which must be installed) of this many pods, tensor / nodes tensor-parallel ranks on each; ' +
            'the leader serves, the group restarts as a whole. ADR 0018.',
        }),
    })
    .meta({ description: 'Parallelism inside one replica.' }),
  [
    {
      cel: 'self.tensor % self.nodes == 0',
      message: `parallelism.tensor must be a multiple of parallelism.nodes: each node runs tensor / nodes ranks (SGLang ${SGLANG_VERSION}: tp_size must be divisible by number of nodes)`,
      fieldPath: '.tensor',
      check: (p) => p.tensor % p.nodes === 0,
    },
    {
      cel: 'self.nodes == 1 || self.data == 1',
      message: `parallelism.nodes above 1 needs parallelism.data 1: SGLang ${SGLANG_VERSION} runs no data-parallel replicas across nodes; scale with replicas instead`,
      fieldPath: '.data',
      check: (p) => p.nodes === 1 || p.data === 1,
    },
  ],
);

/** SGLang's policies its priority scheduling runs with (validation_hook: an assertion at start). */
export const PRIORITY_SCHEDULE_POLICIES = ['fcfs', 'lof'] as const;

/**
 * --default-priority-value with spec.serving.priorityScheduling: the priority of a request that
 * reaches the runtime without one (the kubelet's /health generation, the operator's warm-ups and
 * Tasks, a gateway body whose fallbacks do not all order by priority). SGLang 0.5.23 otherwise
 * gives it -sys.maxsize - 1 (scheduler._set_or_validate_priority): after every stamp, and with
 * preemption off never run while stamped work waits. 0 is the gateway's stamp for a default
 * tenant's long prompt (2 x 0 + 0): an unknown caller ranks as a default one (ADR 0057).
 */
export const UNSTAMPED_RUNTIME_PRIORITY = 0;

/** Serving settings common to every engine of a deployment (spec.serving). */
export const ServingSettings = withRules(
  z.object({
    pageSize: z.number().int().min(1).max(4096).optional().meta({ description: '--page-size.' }),
    maxRunningRequests: z.number().int().min(1).optional().meta({ description: '--max-running-requests.' }),
    maxTotalTokens: z.number().int().min(1).optional().meta({ description: '--max-total-tokens.' }),
    memFractionStatic: z.number().gt(0).max(1).optional().meta({ description: '--mem-fraction-static.' }),
    contextLength: z.number().int().min(1).optional().meta({ description: '--context-length.' }),
    chunkedPrefillSize: z.number().int().min(1).optional().meta({ description: '--chunked-prefill-size.' }),
    schedulePolicy: z
      .enum(SGLANG_CHOICES.schedulePolicy)
      .optional()
      .meta({ description: '--schedule-policy.' }),
    priorityScheduling: z
      .boolean()
      .optional()
      .meta({
        description:
          "The runtimes order their waiting queue by each request's priority (--enable-priority-scheduling " +
          `--disable-priority-preemption --default-priority-value ${UNSTAMPED_RUNTIME_PRIORITY}) and the gateway stamps one: the tenant's priority first, then ` +
          'a prompt with under 2,048 uncached tokens on the chosen runtime before a longer one; a request sent ' +
          "without one ranks as a default tenant's long prompt. Off by default. ADR 0057.",
      }),
  }),
  [
    {
      cel: `!has(self.priorityScheduling) || !self.priorityScheduling || !has(self.schedulePolicy) || self.schedulePolicy in [${PRIORITY_SCHEDULE_POLICIES.map((p) => `'${p}'`).join(', ')}]`,
      message: `serving.priorityScheduling needs serving.schedulePolicy fcfs or lof: SGLang ${SGLANG_VERSION} runs priority scheduling with those policies only`,
      fieldPath: '.schedulePolicy',
      check: (s) =>
        s.priorityScheduling !== true ||
        s.schedulePolicy === undefined ||
        (PRIORITY_SCHEDULE_POLICIES as readonly string[]).includes(s.schedulePolicy),
    },
  ],
);
