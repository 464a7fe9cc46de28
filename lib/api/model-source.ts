// Where a Deployment's model comes from and how it is pinned: spec.model, its
// digests, and its source (a PVC, a node directory, a hub download or an object
// store prefix, the last two fetched into a verified cache: ADR 0016, 0020).
import { z } from 'zod';
import { LocalObjectReference, ObjectName, Quantity, SecretKeySelector, Sha256Digest } from './common.ts';
import { withRules, type Rule } from './rules.ts';

/**
 * Model families HiSparse supports in the pinned SGLang (hisparse_hook.validate_hisparse):
 * DeepSeek sparse-attention (DSA) models, DeepSeek V4 and MiniMax M3. The conformance
 * kit checks each against SGLang with a config.json of that architecture.
 */
export const HISPARSE_FAMILIES = ['deepseek-v3.2', 'glm-5', 'glm-5.1', 'deepseek-v4', 'minimax-m3'] as const;

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
