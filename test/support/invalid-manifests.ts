/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-explicit-any -- each case breaks a manifest in its own way; a typed builder per case would be longer than the cases. */
import { loadSample, type Manifest } from './samples.ts';

/**
 * Manifests the API server must refuse, each with the words it must use.
 * `structural` cases are refused by the OpenAPI schema itself (enum, bounds,
 * required): the API server words those, so zod only has to refuse them too,
 * in its own words (`zodMessage`, when they say what to change). Every other
 * case is a CEL rule whose message zod must repeat exactly.
 */
export interface InvalidCase {
  name: string;
  sample: string;
  mutate: (m: Spec) => void;
  expect: string;
  structural?: boolean;
  /** A structural case's own words in zod, where they say more than the API server's. */
  zodMessage?: string;
}

// Loosely typed on purpose: each case breaks the schema in its own way.
type Spec = Record<string, any>;

const DENSE = 'deployment-dense.yaml';
const HICACHE = 'deployment-hicache.yaml';
const PD = 'deployment-pd-hisparse.yaml';
const MULTI_NODE = 'deployment-multi-node.yaml';
const POLICY = 'cachepolicy.yaml';
const TASK = 'task-sglang.yaml';
const OPENROUTER = 'task-openrouter.yaml';
const QUALIFICATION = 'qualification.yaml';

export const INVALID_CASES: InvalidCase[] = [
  // Deployment: runtime identity
  {
    name: 'image pinned by tag only',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.image = 'lmsysorg/sglang:v0.5.23'),
    expect: 'runtime.image must be pinned by digest',
  },
  {
    name: 'image digest too short',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.image = 'lmsysorg/sglang@sha256:abc123'),
    expect: 'runtime.image must be pinned by digest',
  },
  {
    name: 'extraArgs override --model-path',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--model-path=/other']),
    expect: 'runtime.extraArgs must not set flags the operator renders',
  },
  {
    name: "extraArgs set the runtime's API key (the operator's, per identity)",
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--api-key', 'mine']),
    expect: 'runtime.extraArgs must not set flags the operator renders',
  },
  {
    name: "extraArgs turn on SGLang's native gRPC listener (refused beside --api-key)",
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--grpc-port=50051']),
    expect: 'runtime.extraArgs must not set --grpc-port, --grpc-mode, --smg-grpc-mode or --sidecar',
  },
  {
    name: 'extraArgs run the legacy gRPC server instead of HTTP',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--log-level', 'info', '--grpc-mode']),
    expect: 'runtime.extraArgs must not set --grpc-port, --grpc-mode, --smg-grpc-mode or --sidecar',
  },
  {
    name: 'env sets SGLANG_GRPC_PORT (SGLang reads it as --grpc-port)',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.env = [{ name: 'SGLANG_GRPC_PORT', value: '50051' }]),
    expect: 'runtime.env must not set SGLANG_GRPC_PORT',
  },
  {
    name: "env takes the name of the operator's runtime API key variable",
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.env = [{ name: 'CACHEROUTE_RUNTIME_API_KEY', value: 'mine' }]),
    expect: 'runtime.env must not set SGLANG_GRPC_PORT',
  },
  {
    name: 'extraArgs override --enable-hisparse',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--log-level', 'info', '--enable-hisparse']),
    expect: 'runtime.extraArgs must not set flags the operator renders',
  },
  {
    name: 'extraArgs with a flag SGLang 0.5.23 does not have',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--log-level', 'info', '--enable-turbo']),
    expect: 'runtime.extraArgs may hold only flags of SGLang 0.5.23',
  },
  {
    name: 'extraArgs with an abbreviated flag',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--schedule-conservative=0.5']),
    expect: 'runtime.extraArgs may hold only flags of SGLang 0.5.23',
  },
  {
    name: 'extraArgs that set the HiCache alias the spec renders',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--enable-hicache']),
    expect: 'runtime.extraArgs must not set flags the operator renders',
  },
  {
    name: 'model digest not sha256',
    sample: DENSE,
    mutate: (m) => (m.spec.model.digest = 'md5:abc'),
    expect: 'spec.model.digest',
    structural: true,
  },
  {
    name: 'two model sources',
    sample: DENSE,
    mutate: (m) => (m.spec.model.source.hostPath = { path: '/models/x' }),
    expect: 'model.source needs exactly one of pvc, hostPath, download or objectStore',
  },
  {
    name: 'no model source',
    sample: DENSE,
    mutate: (m) => (m.spec.model.source = {}),
    expect: 'model.source needs exactly one of pvc, hostPath, download or objectStore',
  },
  {
    name: 'download through a proxy with credentials in its URL',
    sample: HICACHE,
    mutate: (m) => (m.spec.model.source.download.proxy = 'http://user:secret@proxy.example:3128'),
    expect: 'model.source.download.proxy must be an http(s) URL without credentials',
  },
  {
    name: 'a node cache with a storage class (a node cache has no volume to class)',
    sample: HICACHE,
    mutate: (m) => {
      m.spec.model.source.download.cache = 'Node';
      m.spec.model.source.download.storageClassName = 'fast-rwx';
    },
    expect: 'model.source.download.cache Node keeps the files on each node',
  },
  {
    name: 'download from a mirror that is not an http(s) URL',
    sample: HICACHE,
    mutate: (m) => (m.spec.model.source.download.endpoint = 'ftp://mirror.example'),
    expect: 'model.source.download.endpoint must be an http(s) URL',
  },
  {
    name: 'download without a revision (the hub would serve main)',
    sample: HICACHE,
    mutate: (m) => delete m.spec.model.revision,
    expect: 'model.source.download needs model.revision, the commit to fetch',
  },
  {
    name: 'download of a branch',
    sample: HICACHE,
    mutate: (m) => (m.spec.model.revision = 'main'),
    expect: 'model.revision must be a 40-character commit id when model.source.download is set',
  },
  {
    name: 'download of a tag',
    sample: HICACHE,
    mutate: (m) => (m.spec.model.revision = 'v1.0'),
    expect: 'model.revision must be a 40-character commit id when model.source.download is set',
  },
  {
    name: 'download of an abbreviated commit id',
    sample: HICACHE,
    mutate: (m) => (m.spec.model.revision = '9216db5'),
    expect: 'model.revision must be a 40-character commit id when model.source.download is set',
  },
  {
    name: 'an object store URL that is not s3://bucket/prefix',
    sample: DENSE,
    mutate: (m) => (m.spec.model.source = { objectStore: { url: 'https://models.example/llama' } }),
    expect: 'model.source.objectStore.url must be s3://<bucket>/<prefix>',
  },
  {
    name: 'an object store prefix with a .. component',
    sample: DENSE,
    mutate: (m) => (m.spec.model.source = { objectStore: { url: 's3://models/llama/../other' } }),
    expect: 'model.source.objectStore.url must have no empty, . or .. component in its prefix',
  },
  {
    name: 'an object store with a hub revision (the digests are the pin)',
    sample: DENSE,
    mutate: (m) => {
      m.spec.model.source = { objectStore: { url: 's3://models/llama' } };
      m.spec.model.revision = 'a'.repeat(40);
    },
    expect: 'model.revision is a hub commit: with model.source.objectStore the digests are the pin',
  },
  {
    name: "an object store node cache with a service account (that is the fetch Job's)",
    sample: DENSE,
    mutate: (m) =>
      (m.spec.model.source = {
        objectStore: { url: 's3://models/llama', cache: 'Node', serviceAccountName: 'model-reader' },
      }),
    expect: 'model.source.objectStore.cache Node fetches in an init container of each SGLang pod',
  },
  {
    name: 'an object store endpoint with credentials in its URL',
    sample: DENSE,
    mutate: (m) =>
      (m.spec.model.source = {
        objectStore: { url: 's3://models/llama', endpoint: 'http://key:secret@minio.storage:9000' },
      }),
    expect:
      'model.source.objectStore.endpoint must be an http(s) URL without a query, fragment or credentials',
  },
  // Deployment: profiles
  {
    name: 'HiCache and HiSparse in one engine',
    sample: HICACHE,
    mutate: (m) => (m.spec.hisparse = { topK: 1024 }),
    expect: 'HiCache and HiSparse cannot be enabled in one engine',
  },
  {
    name: 'hicache settings with dense profile',
    sample: DENSE,
    mutate: (m) => (m.spec.hicache = { ratio: 2 }),
    expect: 'hicache settings apply only with profile: hicache',
  },
  {
    name: 'hicache ratio and size together',
    sample: HICACHE,
    mutate: (m) => (m.spec.hicache.sizeGB = 200),
    expect: 'set hicache.ratio or hicache.sizeGB, not both',
  },
  {
    name: 'hicache with radix cache disabled',
    sample: HICACHE,
    mutate: (m) => (m.spec.radixCache = 'disabled'),
    expect: 'profile hicache extends the radix cache',
  },
  {
    name: 'unknown profile',
    sample: DENSE,
    mutate: (m) => (m.spec.profile = 'sparse'),
    expect: 'Unsupported value: "sparse"',
    structural: true,
  },
  {
    name: 'standalone HiSparse',
    sample: DENSE,
    mutate: (m) =>
      Object.assign(
        m.spec,
        { profile: 'hisparse', radixCache: 'disabled' },
        { model: { ...m.spec.model, family: 'deepseek-v3.2' } },
      ),
    expect: 'profile hisparse runs only on the decode part of a prefill/decode deployment',
  },
  {
    name: 'wake on demand for a pair with only one part at 0',
    sample: PD,
    mutate: (m) => {
      m.spec.wakeOnDemand = true;
      m.spec.disaggregation.prefill.replicas = 0;
      m.spec.disaggregation.decode.replicas = 1;
    },
    expect: 'wakeOnDemand wakes a prefill/decode pair from 0 and 0',
  },
  {
    name: 'wake with an idle time too short to load a model',
    sample: DENSE,
    mutate: (m) => (m.spec.wake = { idleSeconds: 5 }),
    expect: 'should be greater than or equal to 30',
    structural: true,
  },
  {
    name: 'HiSparse on the prefill part',
    sample: PD,
    mutate: (m) =>
      (m.spec.disaggregation.prefill = { replicas: 1, profile: 'hisparse', radixCache: 'disabled' }),
    expect: 'HiSparse runs only on the decode part',
  },
  {
    name: 'HiSparse decode with radix cache',
    sample: PD,
    mutate: (m) => (m.spec.disaggregation.decode.radixCache = 'enabled'),
    expect: 'profile hisparse needs the radix cache disabled',
  },
  {
    name: 'HiSparse on an unsupported family',
    sample: PD,
    mutate: (m) => (m.spec.model.family = 'llama-3-1'),
    expect:
      'HiSparse supports only DeepSeek sparse-attention (DeepSeek V3.2, GLM-5), DeepSeek V4 and MiniMax M3 models',
  },
  {
    name: 'HiSparse without a model family',
    sample: PD,
    mutate: (m) => delete m.spec.model.family,
    expect:
      'HiSparse supports only DeepSeek sparse-attention (DeepSeek V3.2, GLM-5), DeepSeek V4 and MiniMax M3 models',
  },
  {
    name: 'HiSparse with --enable-mixed-chunk',
    sample: PD,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--enable-mixed-chunk']),
    expect: 'SGLang 0.5.23 does not run HiSparse with --enable-mixed-chunk',
  },
  {
    name: 'HiCache buffer_only without storage',
    sample: HICACHE,
    mutate: (m) => (m.spec.hicache = { ratio: 2, hostMemoryMode: 'buffer_only' }),
    expect: 'hicache.hostMemoryMode buffer_only keeps no cache in host memory',
  },
  {
    name: 'an L3 volume without the file backend',
    sample: HICACHE,
    mutate: (m) => (m.spec.hicache = { ratio: 2, storage: { backend: 'mooncake', volume: { size: '1Gi' } } }),
    expect: 'hicache.storage.volume is the shared directory of the file backend',
  },
  {
    name: 'a Mooncake store larger than the bound',
    sample: HICACHE,
    mutate: (m) =>
      (m.spec.hicache = { ratio: 2, storage: { backend: 'mooncake', mooncake: { capacity: '2Ti' } } }),
    expect: 'hicache.storage.mooncake.capacity must be between 64Mi and 1Ti',
  },
  {
    name: 'a Mooncake store without the mooncake backend',
    sample: HICACHE,
    mutate: (m) =>
      (m.spec.hicache = { ratio: 2, storage: { backend: 'file', mooncake: { capacity: '1Gi' } } }),
    expect: 'hicache.storage.mooncake is the store of the mooncake backend',
  },
  {
    name: 'a Mooncake master named in extraConfig',
    sample: HICACHE,
    mutate: (m) =>
      (m.spec.hicache = {
        ratio: 2,
        storage: { backend: 'mooncake', extraConfig: '{"master_server_address":"10.0.0.9:50051"}' },
      }),
    expect: 'remove master_server_address and client_server_address',
  },
  {
    name: 'a file backend directory of its own in extraConfig',
    sample: HICACHE,
    mutate: (m) =>
      (m.spec.hicache = {
        ratio: 2,
        storage: { backend: 'file', extraConfig: '{"file_storage_path":"/tmp/kv"}' },
      }),
    expect: 'the operator mounts the file backend directory on the shared volume',
  },
  {
    name: 'an L3 claim named and shaped at once',
    sample: HICACHE,
    mutate: (m) =>
      (m.spec.hicache = { ratio: 2, storage: { backend: 'file', volume: { claimName: 'kv', size: '1Gi' } } }),
    expect: 'size and storageClassName shape the one the operator makes',
  },
  {
    name: 'HiCache buffer_only on the decode part',
    sample: PD,
    mutate: (m) =>
      (m.spec.disaggregation.decode = {
        replicas: 1,
        profile: 'hicache',
        hicache: { hostMemoryMode: 'buffer_only', storage: { backend: 'file' } },
      }),
    expect: 'decode.hicache.hostMemoryMode buffer_only is refused on decode servers',
  },
  {
    name: 'the fake transfer backend',
    sample: PD,
    mutate: (m) => (m.spec.disaggregation.transferBackend = 'fake'),
    expect: 'disaggregation.transferBackend fake moves no KV',
  },
  {
    name: 'a storage backend newer than SGLang 0.5.23',
    sample: HICACHE,
    mutate: (m) => (m.spec.hicache = { ratio: 2, storage: { backend: 'kvcc' } }),
    expect: 'Unsupported value: "kvcc"',
    structural: true,
  },
  {
    name: 'load events without KV events',
    sample: DENSE,
    mutate: (m) => (m.spec.events = { load: true }),
    expect: 'events.load needs events.kvCache',
  },
  {
    // SGLang's parser offers it; its scheduler does not know it and the server exits at start.
    name: "a schedule policy SGLang's scheduler does not run (priority)",
    sample: DENSE,
    mutate: (m) => (m.spec.serving = { schedulePolicy: 'priority' }),
    expect: 'Unsupported value: "priority"',
    structural: true,
  },
  {
    name: 'priority scheduling with a policy SGLang runs it without (lpm)',
    sample: DENSE,
    mutate: (m) => (m.spec.serving = { priorityScheduling: true, schedulePolicy: 'lpm' }),
    expect: 'serving.priorityScheduling needs serving.schedulePolicy fcfs or lof',
  },
  {
    name: "extraArgs read the gateway's priority stamp the other way round",
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--schedule-low-priority-values-first']),
    expect: 'runtime.extraArgs must not set flags the operator renders',
  },
  {
    name: 'extraArgs turn priority scheduling on beside spec.serving.priorityScheduling',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--enable-priority-scheduling']),
    expect: 'runtime.extraArgs must not set flags the operator renders',
  },
  {
    name: 'extraArgs set the priority of an unstamped request apart from the stamps',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.extraArgs = ['--default-priority-value=-1000']),
    expect: 'runtime.extraArgs must not set flags the operator renders',
  },
  // Deployment: topology and resources
  {
    name: 'disaggregation without transfer backend',
    sample: PD,
    mutate: (m) => delete m.spec.disaggregation.transferBackend,
    expect: 'disaggregation needs transferBackend',
  },
  {
    name: 'bootstrap port below range',
    sample: PD,
    mutate: (m) => (m.spec.disaggregation.bootstrapPort = 80),
    expect: 'spec.disaggregation.bootstrapPort in body should be greater than or equal to 1024',
    zodMessage: 'disaggregation.bootstrapPort must be between 1024 and 65535',
    structural: true,
  },
  {
    name: 'bootstrap port above range',
    sample: PD,
    mutate: (m) => (m.spec.disaggregation.bootstrapPort = 70000),
    expect: 'spec.disaggregation.bootstrapPort in body should be less than or equal to 65535',
    zodMessage: 'disaggregation.bootstrapPort must be between 1024 and 65535',
    structural: true,
  },
  {
    name: 'top-level replicas with disaggregation',
    sample: PD,
    mutate: (m) => (m.spec.replicas = 3),
    expect:
      'with spec.disaggregation set replicas, profile, radixCache, hicache and hisparse under disaggregation',
  },
  {
    name: 'fewer GPUs than tensor parallel',
    sample: HICACHE,
    mutate: (m) => (m.spec.resources.gpus = 1),
    expect: 'resources.gpus must be at least parallelism.tensor',
  },
  {
    name: 'decode part with fewer GPUs than tensor parallel',
    sample: PD,
    mutate: (m) => (m.spec.disaggregation.decode.resources = { gpus: 4 }),
    expect: 'disaggregation.prefill/decode resources.gpus must be at least parallelism.tensor',
  },
  {
    name: 'tensor-parallel ranks that do not split evenly over the nodes',
    sample: MULTI_NODE,
    mutate: (m) => (m.spec.parallelism = { tensor: 6, nodes: 4 }),
    expect: 'parallelism.tensor must be a multiple of parallelism.nodes',
  },
  {
    name: 'data parallelism across nodes',
    sample: MULTI_NODE,
    mutate: (m) => (m.spec.parallelism.data = 2),
    expect: 'parallelism.nodes above 1 needs parallelism.data 1',
  },
  {
    name: 'fewer GPUs a pod than its share of the ranks across nodes',
    sample: MULTI_NODE,
    mutate: (m) => (m.spec.resources.gpus = 2),
    expect: 'resources.gpus must be at least parallelism.tensor / parallelism.nodes',
  },
  {
    name: 'more nodes than the API allows',
    sample: MULTI_NODE,
    mutate: (m) => (m.spec.parallelism.nodes = 65),
    expect: 'spec.parallelism.nodes',
    structural: true,
  },
  {
    name: 'negative replicas',
    sample: DENSE,
    mutate: (m) => (m.spec.replicas = -1),
    expect: 'spec.replicas',
    structural: true,
  },
  {
    name: 'negative decode replicas',
    sample: PD,
    mutate: (m) => (m.spec.disaggregation.decode.replicas = -2),
    expect: 'spec.disaggregation.decode.replicas',
    structural: true,
  },
  {
    name: 'deploymentId not a DNS label',
    sample: DENSE,
    mutate: (m) => (m.spec.deploymentId = 'Llama_8B'),
    expect: 'spec.deploymentId',
    structural: true,
  },
  // CachePolicy
  {
    name: 'no targetRefs',
    sample: POLICY,
    mutate: (m) => (m.spec.targetRefs = []),
    expect: 'spec.targetRefs in body should have at least 1 items',
    zodMessage: 'targetRefs must name at least one Deployment',
    structural: true,
  },
  {
    name: 'picker fail-open with tenants kept apart',
    sample: POLICY,
    mutate: (m) => (m.spec.inferencePool = { failureMode: 'FailOpen' }),
    expect:
      "inferencePool.failureMode FailOpen sends requests past the picker without their tenant's cache_salt",
  },
  {
    name: 'picker failure mode unknown',
    sample: POLICY,
    mutate: (m) => (m.spec.inferencePool = { failureMode: 'Open' }),
    expect: 'spec.inferencePool.failureMode: Unsupported value: "Open"',
    structural: true,
  },
  {
    name: 'targetRef of another kind',
    sample: POLICY,
    mutate: (m) => (m.spec.targetRefs = [{ kind: 'Service', name: 'x' }]),
    expect: 'targetRefs may name only cacheroute.dev Deployments',
  },
  {
    name: 'targetRef of apps/v1 Deployment',
    sample: POLICY,
    mutate: (m) => (m.spec.targetRefs = [{ group: 'apps', kind: 'Deployment', name: 'x' }]),
    expect: 'targetRefs may name only cacheroute.dev Deployments',
  },
  {
    name: 'match threshold above 1',
    sample: POLICY,
    mutate: (m) => (m.spec.routing.cacheAware.matchThreshold = 1.5),
    expect: 'spec.routing.cacheAware.matchThreshold in body should be less than or equal to 1',
    zodMessage: 'cacheAware.matchThreshold must be between 0 and 1',
    structural: true,
  },
  {
    name: 'balance ratio below 1',
    sample: POLICY,
    mutate: (m) => (m.spec.routing.cacheAware.balanceRelThreshold = 0.5),
    expect: 'spec.routing.cacheAware.balanceRelThreshold in body should be greater than or equal to 1',
    zodMessage: 'cacheAware.balanceRelThreshold must be at least 1',
    structural: true,
  },
  {
    name: 'negative balance gap',
    sample: POLICY,
    mutate: (m) => (m.spec.routing.cacheAware.balanceAbsThreshold = -1),
    expect: 'spec.routing.cacheAware.balanceAbsThreshold in body should be greater than or equal to 0',
    zodMessage: 'cacheAware.balanceAbsThreshold must be 0 or more',
    structural: true,
  },
  {
    name: 'negative cost weight',
    sample: POLICY,
    mutate: (m) => (m.spec.routing.cacheAware.costWeight = -2),
    expect: 'spec.routing.cacheAware.costWeight in body should be greater than or equal to 0',
    zodMessage: 'cacheAware.costWeight must be 0 or more',
    structural: true,
  },
  {
    name: 'host-tier weight above 1',
    sample: POLICY,
    mutate: (m) => (m.spec.routing.cacheAware.hostWeight = 2),
    expect: 'spec.routing.cacheAware.hostWeight in body should be less than or equal to 1',
    zodMessage: 'cacheAware.hostWeight must be between 0 and 1',
    structural: true,
  },
  {
    name: 'L3-tier weight below 0',
    sample: POLICY,
    mutate: (m) => (m.spec.routing.cacheAware.storageWeight = -0.5),
    expect: 'spec.routing.cacheAware.storageWeight in body should be greater than or equal to 0',
    zodMessage: 'cacheAware.storageWeight must be between 0 and 1',
    structural: true,
  },
  {
    name: 'prefix-hash load factor of 1',
    sample: POLICY,
    mutate: (m) => (m.spec.routing.prefixHash = { loadFactor: 1 }),
    expect: 'spec.routing.prefixHash.loadFactor in body should be greater than 1',
    zodMessage: 'prefixHash.loadFactor must be above 1 and at most 10',
    structural: true,
  },
  {
    name: 'zero admission concurrency',
    sample: POLICY,
    mutate: (m) => (m.spec.admission.maxConcurrency = 0),
    expect: 'spec.admission.maxConcurrency in body should be greater than or equal to 1',
    zodMessage: 'admission.maxConcurrency must be between 1 and 100000',
    structural: true,
  },
  {
    name: 'zero queue timeout',
    sample: POLICY,
    mutate: (m) => (m.spec.admission.queueTimeoutSeconds = 0),
    expect: 'spec.admission.queueTimeoutSeconds in body should be greater than 0',
    zodMessage: 'admission.queueTimeoutSeconds must be above 0 and at most 3600',
    structural: true,
  },
  {
    name: 'warm-up wait above an hour',
    sample: POLICY,
    mutate: (m) => (m.spec.warmup.routeAfterSeconds = 3601),
    expect: 'spec.warmup.routeAfterSeconds in body should be less than or equal to 3600',
    zodMessage: 'warmup.routeAfterSeconds must be between 0 and 3600',
    structural: true,
  },
  {
    name: 'reuse TTL above a week',
    sample: POLICY,
    mutate: (m) => (m.spec.resultReuse.ttlSeconds = 10_000_000),
    expect: 'spec.resultReuse.ttlSeconds in body should be less than or equal to 604800',
    zodMessage: 'resultReuse.ttlSeconds must be between 1 and 604800',
    structural: true,
  },
  {
    name: 'unknown routing policy',
    sample: POLICY,
    mutate: (m) => (m.spec.routing.policy = 'random'),
    expect: 'Unsupported value: "random"',
    structural: true,
  },
  // Task
  {
    name: 'two input forms',
    sample: TASK,
    mutate: (m) => (m.spec.input.prompt = 'hello'),
    expect: 'input needs exactly one of prompt, messages or configMapRef',
  },
  {
    name: 'no input form',
    sample: TASK,
    mutate: (m) => (m.spec.input = {}),
    expect: 'input needs exactly one of prompt, messages or configMapRef',
  },
  {
    name: 'two targets',
    sample: TASK,
    mutate: (m) =>
      (m.spec.target.openrouter = {
        model: 'a/b',
        upstreamProvider: 'openai',
        inputTokenUpperBound: 10,
        cacheWriteUsage: 'required',
        apiKeySecretRef: { name: 's', key: 'k' },
      }),
    expect: 'target needs exactly one of deployment or openrouter',
  },
  {
    name: 'no target',
    sample: TASK,
    mutate: (m) => (m.spec.target = {}),
    expect: 'target needs exactly one of deployment or openrouter',
  },
  {
    name: 'zero output cap',
    sample: TASK,
    mutate: (m) => (m.spec.maxOutputTokens = 0),
    expect: 'spec.maxOutputTokens in body should be greater than or equal to 1',
    zodMessage: 'maxOutputTokens must be positive',
    structural: true,
  },
  {
    name: 'zero input cap',
    sample: TASK,
    mutate: (m) => (m.spec.budget.maxInputTokens = 0),
    expect: 'spec.budget.maxInputTokens in body should be greater than or equal to 1',
    zodMessage: 'budget.maxInputTokens must be positive',
    structural: true,
  },
  {
    name: 'cost cap without prices',
    sample: TASK,
    mutate: (m) => (m.spec.budget.maxCost = '1.00'),
    expect: 'budget.maxCost needs budget.prices',
  },
  {
    name: 'temperature above 2',
    sample: TASK,
    mutate: (m) => (m.spec.sampling.temperature = 3),
    expect: 'spec.sampling.temperature in body should be less than or equal to 2',
    zodMessage: 'sampling.temperature must be between 0 and 2',
    structural: true,
  },
  {
    name: 'regex check without pattern',
    sample: TASK,
    mutate: (m) => (m.spec.checks = [{ name: 'c', type: 'Regex' }]),
    expect: 'a Regex check needs pattern',
  },
  {
    name: 'rework without feedback',
    sample: TASK,
    mutate: (m) => (m.spec.review = { required: true, decision: 'Rework' }),
    expect: 'review.decision Rework needs feedback',
  },
  {
    name: 'OpenRouter without upstream provider',
    sample: OPENROUTER,
    mutate: (m) => delete m.spec.target.openrouter.upstreamProvider,
    expect: 'spec.target.openrouter.upstreamProvider',
    structural: true,
  },
  {
    name: 'OpenRouter unknown cache-write usage',
    sample: OPENROUTER,
    mutate: (m) => (m.spec.target.openrouter.cacheWriteUsage = 'maybe'),
    expect: 'Unsupported value: "maybe"',
    structural: true,
  },
  {
    name: 'OpenRouter reservation over the input cap',
    sample: OPENROUTER,
    mutate: (m) => (m.spec.target.openrouter.inputTokenUpperBound = 10_000),
    expect: 'target.openrouter.inputTokenUpperBound must fit budget.maxInputTokens',
  },
  {
    name: 'OpenRouter without API key secret',
    sample: OPENROUTER,
    mutate: (m) => delete m.spec.target.openrouter.apiKeySecretRef,
    expect: 'spec.target.openrouter.apiKeySecretRef',
    structural: true,
  },
  {
    name: 'OpenRouter without a cost cap',
    sample: OPENROUTER,
    mutate: (m) => delete m.spec.budget.maxCost,
    expect: 'an openrouter task is a paid call: it needs budget.prices and budget.maxCost',
  },
  {
    name: 'OpenRouter without prices or a cost cap',
    sample: OPENROUTER,
    mutate: (m) => {
      delete m.spec.budget.maxCost;
      delete m.spec.budget.prices;
    },
    expect: 'an openrouter task is a paid call: it needs budget.prices and budget.maxCost',
  },
  // Qualification
  {
    name: 'a qualification whose arms name the same Deployment',
    sample: QUALIFICATION,
    mutate: (m) => (m.spec.arms[1].deployment.name = m.spec.arms[0].deployment.name),
    expect: 'the two arms name the same Deployment',
  },
  {
    name: 'a qualification whose arms share a name',
    sample: QUALIFICATION,
    mutate: (m) => (m.spec.arms[1].name = m.spec.arms[0].name),
    expect: 'the two arms need different names',
  },
  {
    name: 'a qualification with both a generator and a trace',
    sample: QUALIFICATION,
    mutate: (m) => (m.spec.workload.trace = { configMapRef: { name: 'trace', key: 'trace.jsonl' } }),
    expect: 'workload needs exactly one of generator or trace',
  },
  {
    name: 'a qualification generator with nothing to generate',
    sample: QUALIFICATION,
    mutate: (m) => (m.spec.workload.generator = { seed: 1 }),
    expect: 'workload.generator needs sharedPrefix, documents or both',
  },
  {
    name: 'a qualification pass over the request cap',
    sample: QUALIFICATION,
    mutate: (m) => (m.spec.workload.generator.sharedPrefix.conversations = 30),
    expect: 'workload.generator makes at most 64 requests a pass',
  },
  {
    name: 'a qualification with both a concurrency and a request rate',
    sample: QUALIFICATION,
    mutate: (m) => (m.spec.workload.requestRate = { requestsPerSecond: 2 }),
    expect:
      'give exactly one of spec.concurrency (closed loop: requests in flight) or spec.workload.requestRate',
  },
  {
    name: 'a qualification with neither a concurrency nor a request rate',
    sample: QUALIFICATION,
    mutate: (m) => delete m.spec.concurrency,
    expect: 'give exactly one of spec.concurrency',
  },
  {
    name: 'a qualification request rate of zero',
    sample: QUALIFICATION,
    mutate: (m) => {
      delete m.spec.concurrency;
      m.spec.workload.requestRate = { requestsPerSecond: 0 };
    },
    expect: 'requestsPerSecond',
  },
];

export function buildInvalid(c: InvalidCase): Manifest {
  const m = loadSample(c.sample);
  c.mutate(m);
  return m;
}

/** Updates the API server must refuse, given a stored object. */
export interface InvalidUpdateCase {
  name: string;
  sample: string;
  /** Status to write first through the status subresource (a started Task). */
  status?: Record<string, unknown>;
  mutate: (m: Spec) => void;
  expect: string | null;
}

export const UPDATE_CASES: InvalidUpdateCase[] = [
  {
    name: 'model digest changed under the same deploymentId',
    sample: DENSE,
    mutate: (m) => (m.spec.model.digest = `sha256:${'b'.repeat(64)}`),
    expect: 'part of the identity: change deploymentId in the same update',
  },
  {
    name: 'image changed under the same deploymentId',
    sample: DENSE,
    mutate: (m) => (m.spec.runtime.image = `lmsysorg/sglang@sha256:${'c'.repeat(64)}`),
    expect: 'part of the identity: change deploymentId in the same update',
  },
  {
    name: 'model digest changed with a new deploymentId',
    sample: DENSE,
    mutate: (m) =>
      Object.assign(m.spec, {
        deploymentId: 'llama-r2',
        model: { ...m.spec.model, digest: `sha256:${'b'.repeat(64)}` },
      }),
    expect: null,
  },
  {
    name: 'replicas changed under the same deploymentId',
    sample: DENSE,
    mutate: (m) => (m.spec.replicas = 5),
    expect: null,
  },
  {
    name: 'input of a started Task changed',
    sample: TASK,
    status: { phase: 'Running' },
    mutate: (m) => (m.spec.maxOutputTokens = 512),
    expect: 'a started Task is frozen: only spec.review may change',
  },
  {
    name: 'review of a started Task changed',
    sample: TASK,
    status: { phase: 'AwaitingReview' },
    mutate: (m) => (m.spec.review = { required: true, decision: 'Accepted' }),
    expect: null,
  },
  {
    name: 'input of a pending Task changed',
    sample: TASK,
    status: { phase: 'Pending' },
    mutate: (m) => (m.spec.maxOutputTokens = 512),
    expect: null,
  },
];
