import { describe, expect, it } from 'vitest';
import { parseSglangArgs } from './flags.ts';
import { checkSglangArgs } from './startup-checks.ts';

function refusals(extra: string[]): string[] {
  const r = parseSglangArgs(['--model-path', 'm', ...extra]);
  if (!r.ok) throw new Error(r.error.message);
  return checkSglangArgs(r.value.args).map((i) => i.message);
}

const PREFILL = ['--disaggregation-mode', 'prefill'];
const DECODE = ['--disaggregation-mode', 'decode'];

describe('checkSglangArgs (SGLang 0.5.23 startup checks)', () => {
  it.each([
    [[]],
    [['--enable-hierarchical-cache']],
    [[...PREFILL, '--disaggregation-transfer-backend', 'mooncake_tcp', '--enable-hierarchical-cache']],
    [[...DECODE, '--enable-hierarchical-cache', '--disaggregation-decode-enable-radix-cache']],
    [[...DECODE, '--disaggregation-transfer-backend', 'fake']],
    [[...DECODE, '--enable-hisparse', '--disable-radix-cache']],
    [['--grpc-port', '50051']],
    [['--enable-priority-scheduling']],
    [['--enable-priority-scheduling', '--schedule-policy', 'lof']],
    // Without priority scheduling any policy goes.
    [['--schedule-policy', 'lpm']],
    // The legacy gRPC server takes precedence over --grpc-port: the native listener's check is not reached.
    [['--grpc-port', '50051', '--grpc-mode', '--api-key', 'k']],
    [
      [
        '--enable-hierarchical-cache',
        '--hicache-host-memory-mode',
        'buffer_only',
        '--hicache-storage-backend',
        'file',
      ],
    ],
  ])('starts with %j', (extra) => {
    expect(refusals(extra)).toEqual([]);
  });

  it.each([
    [
      ['--grpc-port', '50051', '--api-key', 'k'],
      '--grpc-port is incompatible with --api-key/--admin-api-key',
    ],
    [
      ['--grpc-port', '50051', '--admin-api-key', 'k'],
      '--grpc-port is incompatible with --api-key/--admin-api-key',
    ],
    [
      ['--enable-priority-scheduling', '--schedule-policy', 'lpm'],
      "To use priority scheduling, schedule_policy must be 'fcfs' or 'lof'. 'lpm' is not supported.",
    ],
    [
      [...PREFILL, '--disaggregation-transfer-backend', 'fake'],
      "Prefill server does not support 'fake' as the transfer backend",
    ],
    [
      [...DECODE, '--disaggregation-transfer-backend', 'fake', '--disaggregation-decode-enable-radix-cache'],
      '--disaggregation-decode-enable-radix-cache is incompatible with --disaggregation-transfer-backend fake',
    ],
    [
      [...DECODE, '--enable-hisparse', '--disaggregation-decode-enable-radix-cache'],
      '--disaggregation-decode-enable-radix-cache is incompatible with --enable-hisparse',
    ],
    // The decode server's radix cache is off unless asked for, and HiCache needs one.
    [
      [...DECODE, '--enable-hierarchical-cache'],
      'The arguments enable-hierarchical-cache and disable-radix-cache',
    ],
    [
      ['--enable-hierarchical-cache', '--disable-radix-cache'],
      'The arguments enable-hierarchical-cache and disable-radix-cache',
    ],
    [
      ['--enable-hierarchical-cache', '--hicache-host-memory-mode', 'buffer_only'],
      '--hicache-host-memory-mode buffer_only requires a storage backend',
    ],
    [
      [
        ...DECODE,
        '--enable-hierarchical-cache',
        '--disaggregation-decode-enable-radix-cache',
        '--hicache-host-memory-mode',
        'buffer_only',
        '--hicache-storage-backend',
        'file',
      ],
      '--hicache-host-memory-mode buffer_only is not supported on decode instances',
    ],
    [['--enable-hisparse'], 'Hierarchical sparse attention currently requires --disable-radix-cache.'],
    [
      ['--enable-hisparse', '--disable-radix-cache', '--enable-mixed-chunk'],
      '--enable-hisparse does not support --enable-mixed-chunk yet.',
    ],
    [
      ['--disaggregation-decode-enable-offload-kvcache'],
      'disaggregation-decode-enable-offload-kvcache is only supported for decode side',
    ],
    [['--load-publish-endpoint', 'auto'], '--load-publish-endpoint requires --kv-events-config'],
  ])('refuses %j as SGLang does', (extra, message) => {
    expect(refusals(extra)[0]).toContain(message);
  });
});
