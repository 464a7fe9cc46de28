// The SGLang a Deployment runs and the launch arguments it may add: the image,
// the version, extraArgs and env, held to the pinned SGLang's own flag table
// (lib/sglang/sglang-flags.json). The only module of the API that reads that
// table: it builds the CEL map of known options and hands the rest of the API
// the flag choices it offers as enums, so a schema cannot offer a choice the
// pinned SGLang does not have.
import { z } from 'zod';
import { EnvVar } from './common.ts';
import { choicesOf, SGLANG_FLAGS, SGLANG_VERSION } from '#sglang/catalogue.ts';
import { HICACHE_HOST_MEMORY_MODES, HICACHE_WRITE_POLICIES } from '#sglang/flags.ts';
import { withRules } from './rules.ts';

export { SGLANG_VERSION };

function withoutChoices(
  choices: readonly [string, ...string[]],
  unrunnable: readonly string[],
): readonly [string, ...string[]] {
  const kept = choices.filter((c) => !unrunnable.includes(c));
  if (kept.length === 0 || kept.length + unrunnable.length !== choices.length)
    throw new Error(
      `SGLang ${SGLANG_VERSION} no longer offers ${unrunnable.join(', ')} in ${choices.join(', ')}`,
    );
  return kept as [string, ...string[]];
}

/** The choices of the pinned SGLang's flags that the spec offers as enums, by flag. */
export const SGLANG_CHOICES = {
  hicacheHostMemoryMode: HICACHE_HOST_MEMORY_MODES,
  hicacheWritePolicy: HICACHE_WRITE_POLICIES,
  hicacheIoBackend: choicesOf('--hicache-io-backend'),
  hicacheMemLayout: choicesOf('--hicache-mem-layout'),
  hicacheStorageBackend: choicesOf('--hicache-storage-backend'),
  hicacheStoragePrefetchPolicy: choicesOf('--hicache-storage-prefetch-policy'),
  disaggregationTransferBackend: choicesOf('--disaggregation-transfer-backend'),
  // The parser offers `priority`, but SGLang's scheduler knows no such policy
  // (SchedulePolicy._validate_and_adjust_policy: "Unknown schedule_policy") and the server
  // exits at start; ordering by priority is serving.priorityScheduling.
  schedulePolicy: withoutChoices(choicesOf('--schedule-policy'), ['priority']),
} as const;

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
  // spec.serving.priorityScheduling: the gateway stamps a priority in SGLang's default sign (larger
  // first) only where status says the runtime orders by it, and a runtime that aborts a stamp
  // (--abort-on-priority-when-disabled) or reads it the other way round would undo that; another
  // default for an unstamped request would rank it apart from the stamps (ADR 0057).
  'enable-priority-scheduling',
  'disable-priority-preemption',
  'default-priority-value',
  'schedule-low-priority-values-first',
  'abort-on-priority-when-disabled',
] as const;

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
