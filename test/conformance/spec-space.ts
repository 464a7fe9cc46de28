// Deployment specs to hold against SGLang: a matrix over what decides the
// launch arguments (profile x topology x transfer backend x storage backend x
// host-memory mode x radix setting) and seeded random specs over the rest of
// the schema (serving knobs, HiCache sizes and layouts, parallelism, model
// families, extra arguments). Every enumeration is read from the API's own
// schemas, so a choice added there is generated here.
import { Disaggregation, HiCacheSpec, HISPARSE_FAMILIES, Profile, RadixCache } from '#api';
import { createRng } from '../support/gateway/rng.ts';
import type { Manifest } from '../support/samples.ts';
import { loadSample, loadSamples } from '../support/samples.ts';

type Json = Record<string, unknown>;

export interface GeneratedSpec {
  /** A short description of what varies, for failure messages. */
  readonly label: string;
  readonly manifest: Manifest;
}

const hicacheShape = HiCacheSpec.shape;
const storageShape = hicacheShape.storage.unwrap().shape;
const PROFILES = Profile.options;
const RADIX = [undefined, ...RadixCache.options] as const;
const HOST_MODES = [undefined, ...hicacheShape.hostMemoryMode.unwrap().options] as const;
const STORAGE = [undefined, ...storageShape.backend.options] as const;
const TRANSFER = Disaggregation.shape.transferBackend.unwrap().options;
const WRITE_POLICIES = hicacheShape.writePolicy.unwrap().options;
const IO_BACKENDS = hicacheShape.ioBackend.unwrap().options;
const MEM_LAYOUTS = hicacheShape.memLayout.unwrap().options;
const PREFETCH = storageShape.prefetchPolicy.unwrap().options;

/** The model family the kit checks each spec with (hack/sglang/models/<dir>). */
export function kitModelFor(family: string | undefined): string {
  switch (family) {
    case 'deepseek-v3.2':
    case 'deepseek-v4':
    case 'minimax-m3':
      return family;
    case 'glm-5':
    case 'glm-5.1':
      return 'glm-5';
    default:
      return 'llama';
  }
}

function engine(
  profile: string,
  radix: string | undefined,
  hostMode: string | undefined,
  storage: string | undefined,
): Json {
  const out: Json = { profile };
  if (radix !== undefined) out['radixCache'] = radix;
  if (hostMode !== undefined || storage !== undefined) {
    out['hicache'] = {
      ...(hostMode !== undefined ? { hostMemoryMode: hostMode } : {}),
      ...(storage !== undefined ? { storage: { backend: storage } } : {}),
    };
  }
  return out;
}

function standalone(part: Json, family?: string): Manifest {
  const m = loadSample('deployment-dense.yaml');
  Object.assign(m.spec, part);
  if (family !== undefined) (m.spec['model'] as Json)['family'] = family;
  return m;
}

function disaggregated(
  transferBackend: string,
  prefill: Json,
  decode: Json,
  family = 'deepseek-v3.2',
): Manifest {
  const m = loadSample('deployment-pd-hisparse.yaml');
  (m.spec['model'] as Json)['family'] = family;
  m.spec['disaggregation'] = {
    transferBackend,
    bootstrapPort: 8998,
    prefill: { replicas: 1, ...prefill },
    decode: { replicas: 1, ...decode },
  };
  return m;
}

/** The Deployments in examples/, as users copy them. */
export function buildSampleSpecs(): GeneratedSpec[] {
  return loadSamples()
    .filter((s) => s.doc.kind === 'Deployment')
    .map((s) => ({ label: `sample ${s.file}`, manifest: s.doc }));
}

/** Every combination of one value from each list, in order. */
export function cartesian<T extends readonly (readonly unknown[])[]>(
  ...lists: T
): { [K in keyof T]: T[K][number] }[] {
  return lists.reduce<unknown[][]>(
    (acc, list) => acc.flatMap((combo) => list.map((v) => [...combo, v])),
    [[]],
  ) as {
    [K in keyof T]: T[K][number];
  }[];
}

/** The matrix: every combination of the settings that decide which startup checks apply. */
export function buildSpecMatrix(): GeneratedSpec[] {
  const standaloneSpecs = cartesian(PROFILES, RADIX, HOST_MODES, STORAGE).map(
    ([profile, radix, hostMode, storage]) => ({
      label: `standalone ${profile} radix=${radix} host=${hostMode} storage=${storage}`,
      manifest: standalone(
        engine(profile, radix, hostMode, storage),
        profile === 'hisparse' ? 'deepseek-v3.2' : undefined,
      ),
    }),
  );
  // Prefill/decode: both parts vary; storage backends are sampled (file: a real L3 everywhere;
  // mooncake: rewrites the memory layout) to keep the product within minutes.
  const pdStorage = [undefined, 'file', 'mooncake'] as const;
  const pdSpecs = cartesian(TRANSFER, PROFILES, PROFILES, RADIX, HOST_MODES, pdStorage).map(
    ([transfer, pre, dec, radix, hostMode, storage]) => ({
      label: `pd ${transfer} prefill=${pre} decode=${dec} decodeRadix=${radix} host=${hostMode} storage=${storage}`,
      manifest: disaggregated(
        transfer,
        engine(pre, pre === 'hisparse' ? 'disabled' : undefined, hostMode, storage),
        engine(dec, radix, hostMode, storage),
      ),
    }),
  );
  // Replicas across nodes (LeaderWorkerSet groups): the ranks' split and data parallelism, both
  // topologies; the API refuses some of these, and SGLang must start every one it accepts.
  const multiNodeSpecs = cartesian([2, 4], [1, 2, 4, 8], [1, 2], ['standalone', 'pd'] as const).map(
    ([nodes, tensor, data, topology]) => {
      const m =
        topology === 'pd'
          ? disaggregated(
              'mooncake',
              engine('dense', undefined, undefined, undefined),
              engine('dense', undefined, undefined, undefined),
            )
          : standalone(engine('dense', undefined, undefined, undefined));
      m.spec['parallelism'] = { tensor, data, nodes };
      m.spec['resources'] = {};
      return { label: `${topology} nodes=${nodes} tensor=${tensor} data=${data}`, manifest: m };
    },
  );
  return [...standaloneSpecs, ...pdSpecs, ...multiNodeSpecs];
}

// Extra arguments a platform team plausibly adds; each a real flag of the pinned SGLang.
const EXTRA_ARGS: readonly (readonly string[])[] = [
  ['--log-level', 'debug'],
  ['--enable-mixed-chunk'],
  ['--schedule-conservativeness', '0.8'],
  ['--radix-eviction-policy', 'lfu'],
  ['--kv-cache-dtype', 'fp8_e4m3'],
  ['--cuda-graph-max-bs', '64'],
  ['--chunked-prefill-size', '4096'],
  ['--sleep-on-idle'],
  ['--max-prefill-tokens', '32k'],
];

/** `count` random specs over the rest of the schema, from `seed`. */
export function buildRandomSpecs(count: number, seed: number): GeneratedSpec[] {
  const next = createRng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T;
  const maybe = <T>(p: number, v: () => T): T | undefined => (next() < p ? v() : undefined);
  const families = [undefined, 'llama-3.1', ...HISPARSE_FAMILIES];
  const out: GeneratedSpec[] = [];
  for (let i = 0; i < count; i++) {
    const hicache = (): Json => {
      const sized = pick(['ratio', 'sizeGB', 'none'] as const);
      return {
        ...(sized === 'ratio'
          ? { ratio: pick([1.5, 2, 4]) }
          : sized === 'sizeGB'
            ? { sizeGB: pick([64, 256]) }
            : {}),
        ...(maybe(0.5, () => ({ writePolicy: pick(WRITE_POLICIES) })) ?? {}),
        ...(maybe(0.4, () => ({ ioBackend: pick(IO_BACKENDS) })) ?? {}),
        ...(maybe(0.4, () => ({ memLayout: pick(MEM_LAYOUTS) })) ?? {}),
        ...(maybe(0.5, () => ({ hostMemoryMode: pick(HOST_MODES.filter((h) => h !== undefined)) })) ?? {}),
        ...(maybe(0.4, () => ({
          storage: {
            backend: pick(STORAGE.filter((s) => s !== undefined)),
            ...(maybe(0.5, () => ({ prefetchPolicy: pick(PREFETCH) })) ?? {}),
          },
        })) ?? {}),
      };
    };
    const part = (role: 'standalone' | 'prefill' | 'decode'): Json => {
      const profile = pick(role === 'prefill' ? PROFILES.filter((p) => p !== 'hisparse') : PROFILES);
      const radix = profile === 'hisparse' ? 'disabled' : pick(RADIX);
      return {
        profile,
        ...(radix !== undefined ? { radixCache: radix } : {}),
        ...(profile === 'hicache' ? { hicache: hicache() } : {}),
        ...(profile === 'hisparse'
          ? { hisparse: { topK: pick([512, 2048]), hostToDeviceRatio: pick([4, 8]) } }
          : {}),
      };
    };
    const family = pick(families);
    const tensor = pick([1, 2, 4, 8]);
    const isPd = next() < 0.5;
    const m = isPd
      ? disaggregated(pick(TRANSFER), part('prefill'), part('decode'), family)
      : standalone(part('standalone'), family);
    if (family === undefined) delete (m.spec['model'] as Json)['family'];
    if (!isPd && m.spec['profile'] === 'hisparse') (m.spec['model'] as Json)['family'] = family;
    m.spec['resources'] = { gpus: tensor };
    const serving: Json = {
      ...(maybe(0.5, () => ({ pageSize: pick([1, 16, 64]) })) ?? {}),
      ...(maybe(0.3, () => ({ maxRunningRequests: pick([64, 256]) })) ?? {}),
      ...(maybe(0.3, () => ({ contextLength: pick([8192, 32768]) })) ?? {}),
      ...(maybe(0.3, () => ({ chunkedPrefillSize: pick([2048, 8192]) })) ?? {}),
      ...(maybe(0.3, () => ({ memFractionStatic: pick([0.8, 0.88]) })) ?? {}),
      // The operator's own flags now (extraArgs may not set them): --enable-priority-scheduling
      // --disable-priority-preemption --default-priority-value 0.
      ...(maybe(0.2, () => ({ priorityScheduling: true })) ?? {}),
    };
    if (Object.keys(serving).length > 0) m.spec['serving'] = serving;
    const events = maybe(0.3, () => ({
      kvCache: true,
      load: next() < 0.5,
      ...(maybe(0.3, () => ({ port: 6000 })) ?? {}),
    }));
    if (events) m.spec['events'] = events;
    m.spec['parallelism'] = { tensor, ...(maybe(0.2, () => ({ data: 2 })) ?? {}) };
    const extra = Array.from({ length: Math.floor(next() * 3) }, () => pick(EXTRA_ARGS)).flat();
    if (extra.length > 0) (m.spec['runtime'] as Json)['extraArgs'] = extra;
    out.push({ label: `random #${i} (seed ${seed})`, manifest: m });
  }
  return out;
}
