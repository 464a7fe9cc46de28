import { describe, expect, it } from 'vitest';
import { collectExportedMetrics, parseExpositionNames } from './exported-metrics.ts';

describe('parseExpositionNames', () => {
  it('takes sample names, and the series a TYPE implies for families without samples', () => {
    const text = [
      '# HELP q Queue time.',
      '# TYPE q histogram',
      '# TYPE s summary',
      '# TYPE c_total counter',
      'c_total{a="b"} 3',
      '# TYPE g gauge',
      'g 1',
      'sglang:token_usage{model_name="m"} 0.5',
      '',
    ].join('\n');
    expect(parseExpositionNames(text)).toEqual([
      'c_total',
      'g',
      'q_bucket',
      'q_count',
      'q_sum',
      's',
      's_count',
      's_sum',
      'sglang:token_usage',
    ]);
  });
});

describe('collectExportedMetrics', () => {
  it.each([
    ['controller_runtime_reconcile_errors_total', 'operator'],
    ['workqueue_longest_running_processor_seconds', 'operator'],
    ['leader_election_master_status', 'operator'],
    ['cacheroute_api_request_duration_seconds_bucket', 'operator'],
    ['cacheroute_gateway_requests_total', 'gateway'],
    ['cacheroute_gateway_queue_seconds_bucket', 'gateway'],
    // Registered by the KV index beside the gateway's own, and by prom-client's defaults.
    ['cacheroute_gateway_kv_index_usable', 'gateway'],
    ['cacheroute_gateway_process_cpu_seconds_total', 'gateway'],
    ['sglang:token_usage', 'sglang'],
    // Families the simulator renders only once something happened.
    ['sglang:time_to_first_token_seconds_bucket', 'sglang'],
    ['sglang:num_aborted_requests_total', 'sglang'],
    ['sglang:num_bootstrap_failed_reqs_total', 'sglang'],
    ['sglang:load_back_tokens_total', 'sglang'],
    ['sglang:hicache_host_used_tokens', 'sglang'],
    ['up', 'prometheus'],
  ])('%s comes from the %s', async (name, source) => {
    expect((await collectExportedMetrics()).get(name)).toBe(source);
  });

  it('has no name the code does not export', async () => {
    const names = await collectExportedMetrics();
    expect(names.has('sglang:kv_cache_usage')).toBe(false);
    expect(names.has('cacheroute_gateway_requests')).toBe(false);
  });
});
