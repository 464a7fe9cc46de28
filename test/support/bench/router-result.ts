// A benchmark row with plausible figures, for the report tests to vary.
import type { RouterResult } from '../../bench/bench-report.ts';

export const buildRouterResult = (over: Partial<RouterResult>): RouterResult => ({
  replicas: 1,
  hit_rate: 0.2,
  pooled_bound: 0.25,
  hit_rate_vs_bound: 0.8,
  hit_rate_vs_infinite: 0.7,
  ttft_p50_ms: 100,
  ttft_p99_ms: 500,
  e2e_p50_ms: 300,
  e2e_p99_ms: 900,
  throughput_rps: 5,
  imbalance: 1.1,
  requests: 10,
  errors: 0,
  hit_rate_client: 0.2,
  per_worker: {},
  duration_s: 2,
  loadavg_mean: 1,
  loadavg_max: 1,
  ...over,
});
