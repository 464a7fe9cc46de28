import { describe, expect, it } from 'vitest';
import {
  compareIdentity,
  computeRuntimeIdentity,
  formatMismatches,
  ModelInfo,
  ServerInfo,
} from './identity.ts';

const server = ServerInfo.parse({
  model_path: '/models',
  served_model_name: 'llama-8b',
  tokenizer_path: '/models',
  version: '0.5.23',
  tp_size: 1,
  disable_radix_cache: false,
  enable_hierarchical_cache: false,
  disaggregation_mode: 'null',
  some_future_arg: 42,
});
const model = ModelInfo.parse({ model_path: '/models', tokenizer_path: '/models', is_generation: true });

describe('computeRuntimeIdentity', () => {
  it('reads a standalone server', () => {
    expect(computeRuntimeIdentity(server, model)).toEqual({
      modelPath: '/models',
      servedModelName: 'llama-8b',
      tokenizerPath: '/models',
      version: '0.5.23',
      hicache: false,
      hisparse: false,
      radixCache: true,
      disaggregationMode: 'null',
      tensorParallel: 1,
      priorityScheduling: false,
    });
  });

  it("falls back to SGLang's defaults: served name and tokenizer are the model path", () => {
    const bare = ServerInfo.parse({ model_path: '/m' });
    expect(computeRuntimeIdentity(bare, ModelInfo.parse({ model_path: '/m' }))).toMatchObject({
      servedModelName: '/m',
      tokenizerPath: '/m',
      disaggregationMode: 'null',
      tensorParallel: 1,
    });
  });

  it.each([
    [{ disaggregation_mode: 'decode' }, false],
    [{ disaggregation_mode: 'decode', disaggregation_decode_enable_radix_cache: true }, true],
    [
      {
        disaggregation_mode: 'decode',
        disaggregation_decode_enable_radix_cache: true,
        disable_radix_cache: true,
      },
      false,
    ],
    [{ disaggregation_mode: 'prefill' }, true],
    [{ disaggregation_mode: 'prefill', disable_radix_cache: true }, false],
  ])('radix cache state of %o is %s', (fields, expected) => {
    const info = ServerInfo.parse({ model_path: '/m', ...fields });
    expect(computeRuntimeIdentity(info, model).radixCache).toBe(expected);
  });

  const on = {
    enable_priority_scheduling: true,
    disable_priority_preemption: true,
    default_priority_value: 0,
  };
  it.each([
    [{}, false],
    [on, true],
    // No --default-priority-value: a request sent without a priority would run after every stamp.
    [{ ...on, default_priority_value: null }, false],
    [{ enable_priority_scheduling: true, disable_priority_preemption: true }, false],
    // Another default: an unstamped request would rank apart from a default tenant's.
    [{ ...on, default_priority_value: -1 }, false],
    // Preemption on: a running request may be retracted for a stamp (not what the gateway's is for).
    [{ enable_priority_scheduling: true, default_priority_value: 0 }, false],
    // The smaller first: the gateway's stamp would run the long prompts first.
    [{ ...on, schedule_low_priority_values_first: true }, false],
    [{ ...on, schedule_low_priority_values_first: false }, true],
  ])('orders by the stamped priority with %o: %s', (fields, expected) => {
    const info = ServerInfo.parse({ model_path: '/m', ...fields });
    expect(computeRuntimeIdentity(info, model).priorityScheduling).toBe(expected);
  });
});

describe('compareIdentity', () => {
  it('lists each differing field with both values', () => {
    const declared = computeRuntimeIdentity(server, model);
    const reported = { ...declared, servedModelName: 'other', hicache: true };
    const m = compareIdentity(declared, reported);
    expect(m).toEqual([
      { field: 'servedModelName', declared: 'llama-8b', reported: 'other' },
      { field: 'hicache', declared: false, reported: true },
    ]);
    expect(formatMismatches(m)).toBe(
      'servedModelName: declared llama-8b, runtime reports other; hicache: declared false, runtime reports true',
    );
  });
});
