import { z } from 'zod';
import {
  Affinity,
  Conditions,
  DnsLabel,
  EnvVar,
  LocalObjectReference,
  ObjectName,
  Quantity,
  SecretKeySelector,
  Sha256Digest,
  Toleration,
} from './common.ts';
import { choicesOf, SGLANG_FLAGS, SGLANG_VERSION } from '#sglang/catalogue.ts';
import { HICACHE_HOST_MEMORY_MODES, HICACHE_WRITE_POLICIES } from '#sglang/flags.ts';
import { PartRole } from './deployment-part.ts';
import { withRules, type Rule, type TransitionRule } from './rules.ts';

export const Profile = z.enum(['dense', 'hicache', 'hisparse']).meta({
  description:
    'KV-cache profile: dense (radix cache on the GPU), hicache (GPU + host tiers), hisparse (sparse decode with host KV).',
});
export type Profile = z.infer<typeof Profile>;

export const RadixCache = z.enum(['enabled', 'disabled']).meta({
  description: "Prefix (radix) cache. Unset: SGLang's default for the role (on, except on decode).",
});

/**
 * Model families HiSparse supports in the pinned SGLang (hisparse_hook.validate_hisparse):
 * DeepSeek sparse-attention (DSA) models, DeepSeek V4 and MiniMax M3. The conformance
 * kit checks each against SGLang with a config.json of that architecture.
 */
export const HISPARSE_FAMILIES = ['deepseek-v3.2', 'glm-5', 'glm-5.1', 'deepseek-v4', 'minimax-m3'] as const;

/** Flags the operator renders itself; setting them in extraArgs would split identity from spec. */
export const OPERATOR_OWNED_FLAGS = [
  'model-path',
  'model',
  'served-model-name',
  'tokenizer-path',
  'revision',
  'host',
  'port',
  'tp-size',
  'tensor-parallel-size',
  'dp-size',
  'data-parallel-size',
  'enable-metrics',
  'enable-cache-report',
  'disable-radix-cache',
  'enable-hierarchical-cache',
  'enable-hicache',
  'hicache-ratio',
  'hicache-size',
  'hicache-host-memory-mode',
  'hicache-write-policy',
  'hicache-io-backend',
  'hicache-mem-layout',
  'hicache-storage-backend',
  'hicache-storage-prefetch-policy',
  'hicache-storage-backend-extra-config',
  'enable-hisparse',
  'hierarchical-sparse-attention-extra-config',
  'hisparse-config',
  'disaggregation-mode',
  'disaggregation-transfer-backend',
  'disaggregation-bootstrap-port',
  'disaggregation-ib-device',
  'disaggregation-decode-enable-radix-cache',
  // A replica across nodes (parallelism.nodes): the rank and the leader's address are per pod.
  'nnodes',
  'node-rank',
  'dist-init-addr',
  'nccl-init-addr',
  // The runtime's key is the operator's (a per-identity Secret); the admin key would lock it out of /server_info.
  'api-key',
  'admin-api-key',
] as const;

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
      hostMemoryMode: z.enum(HICACHE_HOST_MEMORY_MODES).optional().meta({
        description:
          '--hicache-host-memory-mode: cache (host memory is a cache tier) or buffer_only (host memory only stages pages to storage; needs storage, not on decode).',
      }),
      writePolicy: z.enum(HICACHE_WRITE_POLICIES).optional().meta({ description: '--hicache-write-policy.' }),
      ioBackend: z
        .enum(choicesOf('--hicache-io-backend'))
        .optional()
        .meta({ description: '--hicache-io-backend.' }),
      memLayout: z
        .enum(choicesOf('--hicache-mem-layout'))
        .optional()
        .meta({ description: '--hicache-mem-layout.' }),
      storage: z
        .object({
          backend: z.enum(choicesOf('--hicache-storage-backend')).meta({
            description:
              'L3 storage backend (--hicache-storage-backend); the only tier shared across instances.',
          }),
          prefetchPolicy: z
            .enum(choicesOf('--hicache-storage-prefetch-policy'))
            .optional()
            .meta({ description: '--hicache-storage-prefetch-policy.' }),
          extraConfig: z
            .string()
            .max(16384)
            .optional()
            .meta({ description: 'JSON passed as --hicache-storage-backend-extra-config.' }),
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

const engineRules: Rule<EngineFields>[] = [
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
      transferBackend: z.enum(choicesOf('--disaggregation-transfer-backend')).optional().meta({
        description:
          'KV transfer backend (--disaggregation-transfer-backend); mooncake_tcp runs Mooncake over TCP where there is no RDMA. fake is refused: SGLang does not run a prefill server with it.',
      }),
      bootstrapPort: z
        .number()
        .int()
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
      message: `disaggregation needs transferBackend: one of ${choicesOf('--disaggregation-transfer-backend')
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
      cel: 'self.bootstrapPort >= 1024 && self.bootstrapPort <= 65535',
      message: 'disaggregation.bootstrapPort must be between 1024 and 65535',
      fieldPath: '.bootstrapPort',
      check: (s) => s.bootstrapPort >= 1024 && s.bootstrapPort <= 65535,
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

// A mirror or a proxy is a plain http(s) URL; a proxy's credentials would be in the spec for
// anyone who can read it, so none are taken (user:password@ is refused). No backslash: the
// pattern is also a CEL string literal.
const HTTP_URL_RE = '^https?://[^ /?#@]+(/[^ ?#]*)?$';
// A bucket name as S3 allows it (3 to 63 lower-case letters, digits, dots and hyphens), then a
// key prefix without a space, query or fragment.
export const OBJECT_STORE_URL_RE = '^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^ ?#]*)?$';
// And its key prefix has no empty, `.` or `..` component (a trailing slash is allowed).
const STORE_PREFIX_COMPONENTS_RE = '^s3://[^/]+(/[^/]+)*/?$';
const STORE_DOT_COMPONENT_RE = '/[.]{1,2}(/|$)';

// What every fetched source (download, objectStore) has: the way out, and the cache's volume.
const FETCHED_SOURCE_FIELDS = {
  proxy: z.string().max(512).optional().meta({
    description:
      'HTTP(S) proxy the fetch goes through, e.g. http://proxy.example:3128 (no credentials in the URL).',
  }),
  sizeLimit: Quantity.optional().meta({
    description: "Storage requested for the model cache volume (default: the operator's --model-cache-size).",
  }),
  storageClassName: ObjectName.optional().meta({
    description:
      "Storage class of the model cache volume, ReadWriteMany (default: the operator's --model-cache-storage-class, else the cluster's default class).",
  }),
};

/** A fetched source's endpoint and proxy: plain http(s) URLs, no credentials in them. */
function fetchedSourceUrlRules(
  field: 'download' | 'objectStore',
  endpointExample: string,
): Rule<{ endpoint?: string | undefined; proxy?: string | undefined }>[] {
  return [
    {
      cel: `!has(self.endpoint) || self.endpoint.matches('${HTTP_URL_RE}')`,
      message: `model.source.${field}.endpoint must be an http(s) URL without a query, fragment or credentials, like ${endpointExample}`,
      fieldPath: '.endpoint',
      check: (d) => d.endpoint === undefined || new RegExp(HTTP_URL_RE).test(d.endpoint),
    },
    {
      cel: `!has(self.proxy) || self.proxy.matches('${HTTP_URL_RE}')`,
      message: `model.source.${field}.proxy must be an http(s) URL without credentials (user:password@ would be readable in the spec), like http://proxy.example:3128`,
      fieldPath: '.proxy',
      check: (d) => d.proxy === undefined || new RegExp(HTTP_URL_RE).test(d.proxy),
    },
  ];
}

export const ModelDownload = withRules(
  z.object({
    tokenSecretRef: SecretKeySelector.optional().meta({
      description:
        'Secret key holding the hub token: mounted as a file into the fetch Job only, never read by the operator.',
    }),
    endpoint: z.string().max(512).optional().meta({
      description:
        'The hub or a mirror of its API, e.g. https://hf-mirror.example (default https://huggingface.co).',
    }),
    ...FETCHED_SOURCE_FIELDS,
    cache: z.enum(['Shared', 'Node']).optional().meta({
      description:
        "Shared (default): one ReadWriteMany volume per namespace and digests, filled by a fetch Job. Node: for clusters without ReadWriteMany storage, each node keeps its own copy under the operator's --model-cache-node-root, fetched once per node by the first pod there (an init container) and verified before SGLang starts (ADR 0019).",
    }),
  }),
  [
    {
      cel: "!has(self.cache) || self.cache != 'Node' || (!has(self.storageClassName) && !has(self.sizeLimit))",
      message:
        "model.source.download.cache Node keeps the files on each node's disk (under the operator's --model-cache-node-root): storageClassName and sizeLimit are for the Shared cache's volume, leave them out",
      fieldPath: '.cache',
      check: (d) => d.cache !== 'Node' || (d.storageClassName === undefined && d.sizeLimit === undefined),
    },
    ...fetchedSourceUrlRules('download', 'https://huggingface.co or a mirror'),
  ],
);
export type ModelDownload = z.infer<typeof ModelDownload>;

/** The Secret keys an object store's credentials are read from (the AWS SDK's own variable names). */
export const OBJECT_STORE_CREDENTIAL_KEYS = {
  accessKeyId: 'AWS_ACCESS_KEY_ID',
  secretAccessKey: 'AWS_SECRET_ACCESS_KEY',
  sessionToken: 'AWS_SESSION_TOKEN',
} as const;

export const ModelObjectStore = withRules(
  z.object({
    url: z.string().min(1).max(1024).meta({
      description:
        's3://<bucket>/<prefix>: every object under the prefix is a file of the model, at its key below the prefix.',
    }),
    endpoint: z.string().max(512).optional().meta({
      description:
        "An S3-compatible store's endpoint, e.g. http://minio.storage:9000 (default: AWS S3 in the region).",
    }),
    region: z
      .string()
      .min(1)
      .max(64)
      .regex(/^[a-z0-9-]+$/)
      .optional()
      .meta({ description: "The bucket's region (default us-east-1; AWS_REGION where IRSA sets it)." }),
    forcePathStyle: z.boolean().optional().meta({
      description:
        'Address the bucket in the URL path (endpoint/bucket/key) instead of its host name: most S3-compatible stores want true.',
    }),
    credentialsSecretRef: LocalObjectReference.optional().meta({
      description:
        "A Secret with keys AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and optionally AWS_SESSION_TOKEN, given to the fetcher only as environment variables, never read by the operator. Without it the fetcher uses the AWS SDK's default chain (IRSA, EKS pod identity, instance metadata).",
    }),
    serviceAccountName: ObjectName.optional().meta({
      description:
        'The service account the fetch Job runs as (cache Shared), for IRSA or EKS pod identity: its API token is still not mounted.',
    }),
    ...FETCHED_SOURCE_FIELDS,
    cache: z.enum(['Shared', 'Node']).optional().meta({
      description:
        "Shared (default): one ReadWriteMany volume per namespace and digests, filled by a fetch Job. Node: each node keeps its own copy under the operator's --model-cache-node-root, fetched once per node by the first pod there (an init container).",
    }),
  }),
  [
    {
      cel: `self.url.matches('${OBJECT_STORE_URL_RE}')`,
      message:
        'model.source.objectStore.url must be s3://<bucket>/<prefix> (a bucket name of 3 to 63 lower-case letters, digits, dots and hyphens; no space, query or fragment), like s3://models/llama-3.1-8b',
      fieldPath: '.url',
      check: (o) => new RegExp(OBJECT_STORE_URL_RE).test(o.url),
    },
    {
      cel: `self.url.matches('${STORE_PREFIX_COMPONENTS_RE}') && !self.url.matches('${STORE_DOT_COMPONENT_RE}')`,
      message:
        'model.source.objectStore.url must have no empty, . or .. component in its prefix (the files are the keys below it), like s3://models/llama-3.1-8b',
      fieldPath: '.url',
      check: (o) =>
        new RegExp(STORE_PREFIX_COMPONENTS_RE).test(o.url) && !new RegExp(STORE_DOT_COMPONENT_RE).test(o.url),
    },
    ...fetchedSourceUrlRules('objectStore', 'http://minio.storage:9000'),
    {
      cel: "!has(self.cache) || self.cache != 'Node' || (!has(self.storageClassName) && !has(self.sizeLimit) && !has(self.serviceAccountName))",
      message:
        "model.source.objectStore.cache Node fetches in an init container of each SGLang pod, onto the node's disk: storageClassName and sizeLimit are for the Shared cache's volume and serviceAccountName for its fetch Job, leave them out",
      fieldPath: '.cache',
      check: (o) =>
        o.cache !== 'Node' ||
        (o.storageClassName === undefined && o.sizeLimit === undefined && o.serviceAccountName === undefined),
    },
  ],
);
export type ModelObjectStore = z.infer<typeof ModelObjectStore>;

export const ModelSource = withRules(
  z
    .object({
      pvc: z
        .object({
          claimName: ObjectName,
          subPath: z.string().max(1024).optional(),
        })
        .optional()
        .meta({ description: 'Model files on a PersistentVolumeClaim, mounted read-only.' }),
      hostPath: z
        .object({
          path: z.string().min(1).max(1024).regex(/^\//),
          verify: z.boolean().optional().meta({
            description:
              "Hold the node's copy to the digests in an init container before SGLang starts: every byte the first time on a node (minutes for hundreds of GB), then the node's record of the files' stats while they are unchanged. Default true where the operator has a fetch image; false: mounted as it is, ModelReady=True PreStaged.",
          }),
        })
        .optional()
        .meta({
          description: 'Model files on a node directory (pre-staged on every node the model runs on).',
        }),
      download: ModelDownload.optional().meta({
        description:
          'Fetch model.path at commit model.revision from the hub once into a cache volume shared by every replica (and every Deployment with the same digests), verified against the digests before any SGLang pod starts (ADR 0016).',
      }),
      objectStore: ModelObjectStore.optional().meta({
        description:
          'Fetch the objects under an s3:// prefix (AWS S3 or an S3-compatible store) once into the model cache, as download does, verified against the digests before any SGLang pod starts (ADR 0020).',
      }),
    })
    .meta({
      description: 'Where the model files come from: exactly one of pvc, hostPath, download, objectStore.',
    }),
  [
    {
      cel: '(has(self.pvc) ? 1 : 0) + (has(self.hostPath) ? 1 : 0) + (has(self.download) ? 1 : 0) + (has(self.objectStore) ? 1 : 0) == 1',
      message: 'model.source needs exactly one of pvc, hostPath, download or objectStore',
      check: (s) =>
        [s.pvc, s.hostPath, s.download, s.objectStore].filter((x) => x !== undefined).length === 1,
    },
  ],
);

// A hub commit id: branches and tags move, and the digests pin the files of one commit.
const COMMIT_ID_RE = '^[0-9a-f]{40}$';

export const ModelSpec = withRules(
  z
    .object({
      path: z
        .string()
        .min(1)
        .max(512)
        .meta({ description: 'Model path or hub repository id (--model-path).' }),
      servedName: z
        .string()
        .min(1)
        .max(253)
        .regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]*$/)
        .meta({ description: 'Name clients use in the OpenAI `model` field (--served-model-name).' }),
      revision: z.string().min(1).max(128).optional().meta({
        description:
          'Hub revision (--revision). With source.download it is required and must be the commit id (40 hex digits): a branch or tag like main moves, the digests pin the files of one commit.',
      }),
      digest: Sha256Digest.meta({
        description:
          "sha256 of the model's file manifest (ADR 0013): one line `<sha256> <size> <path>` per file, sorted by path, hidden files and directories (.git/, .cache/) left out. Part of the identity fingerprint. Compute with `make model-digest DIR=<model dir>`.",
      }),
      tokenizerPath: z
        .string()
        .min(1)
        .max(512)
        .optional()
        .meta({ description: 'Tokenizer path (--tokenizer-path); defaults to the model path.' }),
      tokenizerDigest: Sha256Digest.meta({
        description:
          'sha256 of the file manifest (ADR 0013) of the tokenizer files at the top of tokenizerPath, or of the model directory without it: tokenizer.json, tokenizer_config.json, special_tokens_map.json, added_tokens.json, tokenizer.model, spiece.model, sentencepiece.bpe.model, tiktoken.model, vocab.json, vocab.txt, merges.txt, chat_template.jinja, chat_template.json, *.tiktoken, tokenization_*.py, additional_chat_templates/*.jinja. Part of the identity fingerprint. Compute with `make model-digest DIR=<model dir>`.',
      }),
      family: z
        .string()
        .min(1)
        .max(63)
        .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/)
        .optional()
        .meta({
          description: `Model family, e.g. llama-3.1; HiSparse needs one of ${HISPARSE_FAMILIES.join(', ')}.`,
        }),
      source: ModelSource,
    })
    .meta({ description: 'The model served, pinned by digest.' }),
  [
    {
      cel: '!has(self.source.download) || has(self.revision)',
      message:
        'model.source.download needs model.revision, the commit to fetch (without it the hub serves main, which moves): pin the commit id',
      fieldPath: '.revision',
      check: (m) => m.source.download === undefined || m.revision !== undefined,
    },
    {
      cel: '!has(self.source.objectStore) || !has(self.revision)',
      message:
        'model.revision is a hub commit: with model.source.objectStore the digests are the pin, leave it out',
      fieldPath: '.revision',
      check: (m) => m.source.objectStore === undefined || m.revision === undefined,
    },
    {
      cel: `!has(self.source.download) || !has(self.revision) || self.revision.matches('${COMMIT_ID_RE}')`,
      message:
        "model.revision must be a 40-character commit id when model.source.download is set (a branch or tag like 'main' moves): pin the commit",
      fieldPath: '.revision',
      check: (m) =>
        m.source.download === undefined ||
        m.revision === undefined ||
        new RegExp(COMMIT_ID_RE).test(m.revision),
    },
  ],
);

const IMAGE_DIGEST_RE = '^[^@ ]+@sha256:[a-f0-9]{64}$';
const OWNED_FLAGS_RE = `^--(${OPERATOR_OWNED_FLAGS.join('|')})(=.*)?$`;

/**
 * Flags that take SGLang off the HTTP server the operator verifies and the gateway routes over:
 * the legacy gRPC modes replace it, and the native gRPC listener (--grpc-port, and --sidecar,
 * which needs it) is refused beside the --api-key the operator always renders.
 */
export const GRPC_FLAGS = ['grpc-port', 'grpc-mode', 'smg-grpc-mode', 'sidecar', 'sidecar-args'] as const;
const GRPC_FLAGS_RE = `^--(${GRPC_FLAGS.join('|')})(=.*)?$`;
/** SGLang reads this as --grpc-port (serving_hook.handle_deprecated_args). */
const GRPC_PORT_ENV = 'SGLANG_GRPC_PORT';
/** The operator's own container variables (the runtime API key's) start so. */
export const RESERVED_ENV_PREFIX = 'CACHEROUTE_';
// Every long option of the pinned SGLang (its own parser's table), so a typo or a flag of
// another release is refused at apply instead of crash-looping the pod.
const SGLANG_OPTIONS = [...new Set(SGLANG_FLAGS.flatMap((f) => [f.name, ...f.aliases]))]
  .filter((o) => o.startsWith('--'))
  .map((o) => o.slice(2));
// A map literal: CEL looks a key up at constant cost, where a list or an alternation of 500
// names costs more than the API server's per-rule budget for 64 arguments.
const KNOWN_OPTIONS_CEL = `{${SGLANG_OPTIONS.map((o) => `'--${o}': true`).join(', ')}}`;
const KNOWN_OPTIONS = new Set(SGLANG_OPTIONS.map((o) => `--${o}`));
const optionOf = (arg: string): string => (arg.includes('=') ? arg.slice(0, arg.indexOf('=')) : arg);

export const RuntimeSpec = withRules(
  z
    .object({
      image: z
        .string()
        .min(1)
        .max(512)
        .meta({ description: 'SGLang image pinned by digest, e.g. lmsysorg/sglang@sha256:<64 hex>.' }),
      version: z
        .string()
        // Label-safe (it becomes app.kubernetes.io/version on the pods): no `+` local versions.
        .regex(/^[0-9]+\.[0-9]+\.[0-9]+([.-]?[0-9A-Za-z][0-9A-Za-z.-]*)?$/)
        .max(63)
        .meta({
          description: 'SGLang version in the image; the operator emits only flags that exist in it.',
        }),
      extraArgs: z
        .array(z.string().min(1).max(1024))
        .max(64)
        .optional()
        .meta({ description: 'Extra SGLang launch arguments; they take part in identity.' }),
      env: z
        .array(EnvVar)
        .max(64)
        .optional()
        .meta({ description: 'Extra environment for the SGLang container; takes part in identity.' }),
    })
    .meta({ description: 'The SGLang runtime.' }),
  [
    {
      cel: `self.image.matches('${IMAGE_DIGEST_RE}')`,
      message:
        'runtime.image must be pinned by digest (repository@sha256:<64 hex>); a tag alone can change what runs',
      fieldPath: '.image',
      check: (s) => new RegExp(IMAGE_DIGEST_RE).test(s.image),
    },
    {
      cel: `!has(self.extraArgs) || self.extraArgs.all(a, !a.startsWith('--') || (a.contains('=') ? a.substring(0, a.indexOf('=')) : a) in ${KNOWN_OPTIONS_CEL})`,
      message: `runtime.extraArgs may hold only flags of SGLang ${SGLANG_VERSION}, spelled out in full (see hack/sglang/README.md; make sglang-flags lists them)`,
      fieldPath: '.extraArgs',
      check: (s) => (s.extraArgs ?? []).every((a) => !a.startsWith('--') || KNOWN_OPTIONS.has(optionOf(a))),
    },
    {
      cel: `!has(self.extraArgs) || self.extraArgs.all(a, !a.matches('${OWNED_FLAGS_RE}'))`,
      message: `runtime.extraArgs must not set flags the operator renders from the spec (--${OPERATOR_OWNED_FLAGS.slice(0, 4).join(', --')}, ...): use the spec fields`,
      fieldPath: '.extraArgs',
      check: (s) => (s.extraArgs ?? []).every((a) => !new RegExp(OWNED_FLAGS_RE).test(a)),
    },
    {
      cel: `!has(self.extraArgs) || self.extraArgs.all(a, !a.matches('${GRPC_FLAGS_RE}'))`,
      message: `runtime.extraArgs must not set --grpc-port, --grpc-mode, --smg-grpc-mode or --sidecar: the operator verifies and the gateway routes over SGLang's HTTP server with --api-key, which SGLang ${SGLANG_VERSION} refuses beside native gRPC and does not start in gRPC mode`,
      fieldPath: '.extraArgs',
      check: (s) => (s.extraArgs ?? []).every((a) => !new RegExp(GRPC_FLAGS_RE).test(a)),
    },
    {
      cel: `!has(self.env) || self.env.all(e, e.name != '${GRPC_PORT_ENV}' && !e.name.startsWith('${RESERVED_ENV_PREFIX}'))`,
      message: `runtime.env must not set ${GRPC_PORT_ENV} (SGLang ${SGLANG_VERSION} reads it as --grpc-port, refused beside the operator's --api-key) or a name starting with ${RESERVED_ENV_PREFIX} (the operator's own)`,
      fieldPath: '.env',
      check: (s) =>
        (s.env ?? []).every((e) => e.name !== GRPC_PORT_ENV && !e.name.startsWith(RESERVED_ENV_PREFIX)),
    },
  ],
);

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
      serving: z
        .object({
          pageSize: z.number().int().min(1).max(4096).optional().meta({ description: '--page-size.' }),
          maxRunningRequests: z
            .number()
            .int()
            .min(1)
            .optional()
            .meta({ description: '--max-running-requests.' }),
          maxTotalTokens: z.number().int().min(1).optional().meta({ description: '--max-total-tokens.' }),
          memFractionStatic: z
            .number()
            .gt(0)
            .max(1)
            .optional()
            .meta({ description: '--mem-fraction-static.' }),
          contextLength: z.number().int().min(1).optional().meta({ description: '--context-length.' }),
          chunkedPrefillSize: z
            .number()
            .int()
            .min(1)
            .optional()
            .meta({ description: '--chunked-prefill-size.' }),
          schedulePolicy: z
            .enum(choicesOf('--schedule-policy'))
            .optional()
            .meta({ description: '--schedule-policy.' }),
        })
        .optional()
        .meta({
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

export const EndpointRole = z.enum(['standalone', 'prefill', 'decode']);
export type EndpointRole = z.infer<typeof EndpointRole>;

/** What a runtime reported about itself through /server_info and /model_info. */
export const ReportedIdentity = z.object({
  modelPath: z.string().optional(),
  servedModelName: z.string().optional(),
  tokenizerPath: z.string().optional(),
  version: z.string().optional(),
  hicache: z.boolean().optional(),
  hisparse: z.boolean().optional(),
  radixCache: z.boolean().optional(),
  disaggregationMode: z.string().optional(),
  tensorParallel: z.number().int().optional(),
});

export const EndpointEvents = z
  .object({
    port: z.number().int().meta({ description: 'KV events: rank r publishes on port + r (ZMQ PUB).' }),
    ranks: z.number().int().meta({ description: 'Data-parallel ranks: one publisher each.' }),
    topic: z.string(),
    blockSize: z.number().int().meta({ description: 'Tokens a block (page) is hashed over.' }),
    replayPort: z
      .number()
      .int()
      .optional()
      .meta({ description: 'Replay (ZMQ ROUTER): rank r on replayPort + r.' }),
    loadPort: z.number().int().optional().meta({ description: 'Load publisher: rank r on loadPort + r.' }),
    loadTopic: z.string().optional(),
  })
  .meta({
    description: "The runtime's event publishers on the pod IP, as its /server_info advertises them.",
  });
export type EndpointEvents = z.infer<typeof EndpointEvents>;

export const Endpoint = z.object({
  pod: z.string(),
  ip: z.string(),
  port: z.number().int(),
  role: EndpointRole,
  ready: z.boolean(),
  verified: z.boolean(),
  fingerprint: z.string().optional().meta({ description: 'Identity fingerprint the pod was rendered with.' }),
  bootstrapPort: z.number().int().optional(),
  reason: z.string().optional().meta({ description: 'Why the endpoint is not verified.' }),
  message: z.string().optional(),
  reported: ReportedIdentity.optional(),
  restartCount: z.number().int().optional(),
  verifiedAt: z.string().optional(),
  events: EndpointEvents.optional(),
});
export type Endpoint = z.infer<typeof Endpoint>;

export const Identity = z.object({
  deploymentId: z.string(),
  fingerprint: z.string(),
  modelDigest: z.string().optional(),
  tokenizerDigest: z.string().optional(),
  imageDigest: z.string().optional(),
});

/** What the operator measured of a Deployment's cache (controllers/deployment/cache-health). */
export const CacheHealthStatus = z.object({
  windowSeconds: z.number().int().meta({ description: 'The window the figures are over.' }),
  promptTokens: z.number().int().meta({
    description: 'Prompt tokens the prefilling runtimes processed in the window (their own count).',
  }),
  hitRate: z
    .number()
    .optional()
    .meta({ description: 'Cached prompt tokens over prompt tokens, as the runtimes report them (0..1).' }),
  predictedHitRate: z.number().optional().meta({
    description: "What the gateway's routing expected cached for the requests it routed here (0..1).",
  }),
  hostTierUsage: z
    .number()
    .optional()
    .meta({ description: "HiCache: the fullest endpoint's host tier, used over total tokens (0..1)." }),
});
export type CacheHealthStatus = z.infer<typeof CacheHealthStatus>;

/** One part of a disaggregated Deployment in its status: its scale target and its pods. */
export const PartReplicas = z.object({
  part: PartRole,
  name: z.string().meta({ description: "The part's DeploymentPart (kubectl get sgdpart <name>)." }),
  replicas: z.number().int().meta({
    description:
      'Replicas the part runs: its DeploymentPart spec.replicas, or at least wake.replicas while a pair declared at 0 is awake.',
  }),
  readyReplicas: z.number().int(),
  verifiedReplicas: z.number().int(),
});
export type PartReplicas = z.infer<typeof PartReplicas>;

/** The model's delivery (controllers/deployment/model-cache): a download source's shared cache, a pvc source's verification. */
export const ModelDeliveryStatus = z.object({
  phase: z.enum(['Pending', 'Fetching', 'Verifying', 'Verified', 'Failed', 'PreStaged']).meta({
    description:
      'Pending: the cache volume or the Job is being made; Fetching: the fetch Job runs (a node cache: the pods fetch, none verified yet); Verifying: the verify Job of a pvc source runs (a hostPath: the pods verify, none done yet); Verified: every file matched the digests; Failed: see reason; PreStaged: mounted as it is, not checked (hostPath.verify false, or an operator without a fetch image).',
  }),
  cache: z.string().optional().meta({ description: 'The cache PersistentVolumeClaim, in this namespace.' }),
  job: z
    .string()
    .optional()
    .meta({ description: 'The fetch Job, or the verify Job of a pvc source, in this namespace.' }),
  reason: z.string().optional(),
  message: z.string().optional(),
  path: z.string().optional().meta({ description: 'The model file a failure is about.' }),
  files: z.number().int().optional(),
  bytesTotal: z.number().int().optional(),
  bytesDone: z.number().int().optional(),
  progress: z.number().optional().meta({ description: 'bytesDone over bytesTotal (0..1).' }),
  digest: z.string().optional().meta({ description: 'The verified model digest.' }),
  tokenizerDigest: z.string().optional().meta({ description: 'The verified tokenizer digest.' }),
  verifiedAt: z.string().optional(),
});
export type ModelDeliveryStatus = z.infer<typeof ModelDeliveryStatus>;

export const DeploymentStatus = z.object({
  observedGeneration: z.number().int().optional(),
  conditions: Conditions.optional(),
  profile: z.string().optional().meta({ description: 'Profile summary, e.g. dense or pd:hicache/hisparse.' }),
  replicas: z
    .number()
    .int()
    .optional()
    .meta({ description: 'Pods that exist, all parts together (the scale subresource reads it).' }),
  readyReplicas: z.number().int().optional(),
  verifiedReplicas: z.number().int().optional(),
  updatedReplicas: z.number().int().optional(),
  selector: z
    .string()
    .optional()
    .meta({ description: 'Label selector of the pods, for the scale subresource.' }),
  parts: z.array(PartReplicas).optional().meta({
    description:
      'With disaggregation: each part, the DeploymentPart that is its scale target, and its replicas.',
  }),
  identity: Identity.optional(),
  endpoints: z.array(Endpoint).optional(),
  routable: z
    .object({ value: z.boolean(), reason: z.string(), message: z.string().optional() })
    .optional()
    .meta({ description: 'Whether the gateway may send generation requests, and why not.' }),
  model: ModelDeliveryStatus.optional().meta({
    description: "How the model's files got here, and whether they were verified (the ModelReady condition).",
  }),
  cache: CacheHealthStatus.optional().meta({
    description: "The cache's health over the last window (the CacheHealthy condition says what it means).",
  }),
  wake: z
    .object({
      awake: z.boolean().meta({ description: 'Running wake.replicas because of recent requests.' }),
      demandAt: z
        .string()
        .optional()
        .meta({ description: 'When the gateway tier last held or ran a request for it (RFC 3339).' }),
      message: z.string().optional().meta({ description: 'Why it cannot wake, when it cannot.' }),
    })
    .optional()
    .meta({
      description:
        'With wakeOnDemand and replicas 0 (both parts at 0 with disaggregation): whether it is awake, and since when it is wanted.',
    }),
});
export type DeploymentStatus = z.infer<typeof DeploymentStatus>;
