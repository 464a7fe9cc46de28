// What the operator reports of a Deployment (its status subresource): the
// endpoints it verified, the identity they serve, the model's delivery, the
// cache's health, the parts and the wake state.
import { z } from 'zod';
import { Conditions } from './common.ts';
import { UNSTAMPED_RUNTIME_PRIORITY } from './deployment-engine.ts';
import { PartRole } from './deployment-part.ts';

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
  priorityScheduling: z
    .boolean()
    .optional()
    .meta({
      description: `It orders its queue by the request's priority (SGLang's --enable-priority-scheduling, preemption off, the larger first, --default-priority-value ${UNSTAMPED_RUNTIME_PRIORITY} for a request without one): the gateway stamps one.`,
    }),
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

/** A HiCache L3 tier the operator provisioned for one role's replicas (controllers/deployment/l3). */
export const L3TierStatus = z.object({
  role: EndpointRole,
  backend: z.string().meta({ description: 'The storage backend (--hicache-storage-backend).' }),
  claim: z.string().optional().meta({ description: 'backend file: the shared PersistentVolumeClaim.' }),
  managed: z
    .boolean()
    .optional()
    .meta({ description: 'The operator made the claim (it goes with the Deployment).' }),
  directory: z.string().optional().meta({
    description:
      'The directory of the claim the replicas share: one per identity fingerprint, so KV computed by other weights or arguments is never read.',
  }),
  reachable: z.boolean().meta({
    description:
      'Every replica can share it (file: Bound, ReadWriteMany; mooncake: the master answers and counts the segment).',
  }),
  reason: z.string().optional(),
  message: z.string().optional(),
  capacity: z.string().optional().meta({
    description: "file: the claim's capacity, as its status says; mooncake: the store's declared segment.",
  }),
  accessModes: z.array(z.string()).optional(),
  store: z.string().optional().meta({
    description:
      'backend mooncake: the Deployment (a mooncake_master and a store node) and Service the operator runs for this role and identity.',
  }),
  master: z
    .string()
    .optional()
    .meta({ description: 'backend mooncake: the address the replicas are given (MOONCAKE_MASTER).' }),
  capacityBytes: z.number().int().optional().meta({
    description: 'backend mooncake: the segment memory the master counts (its master_total_capacity_bytes).',
  }),
  usedBytes: z
    .number()
    .int()
    .optional()
    .meta({ description: 'backend mooncake: the segment memory holding KV (master_allocated_bytes).' }),
  objects: z
    .number()
    .int()
    .optional()
    .meta({ description: 'backend mooncake: the keys the master holds (master_key_count), two a page.' }),
});
export type L3TierStatus = z.infer<typeof L3TierStatus>;

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
  l3: z.array(L3TierStatus).optional().meta({
    description:
      "HiCache's shared L3 tier of each role that declares one: what backs it and whether it is reachable.",
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
