import { describe, expect, it } from 'vitest';
import { buildEngineConfig, parseSimArgs } from './config.ts';

const PRIORITY = ['--enable-priority-scheduling', '--disable-priority-preemption'];

function engineConfigOf(argv: readonly string[]) {
  const parsed = parseSimArgs(['--model-path', 'm', ...argv]);
  if (!parsed.ok) throw new Error(parsed.error);
  return buildEngineConfig(parsed.value);
}

describe("buildEngineConfig: where SGLang's scheduler sorts by the longest output", () => {
  it.each([
    { name: 'lof', argv: ['--schedule-policy', 'lof'], lof: true },
    { name: 'lof with priority scheduling', argv: ['--schedule-policy', 'lof', ...PRIORITY], lof: true },
    // lof is cache-agnostic: _validate_and_adjust_policy keeps it with the tree cache disabled.
    { name: 'lof, radix cache off', argv: ['--schedule-policy', 'lof', '--disable-radix-cache'], lof: true },
    // A PD decode calls calc_priority only with priority scheduling (_get_new_prebuilt_batch).
    {
      name: 'lof on a PD decode',
      argv: ['--schedule-policy', 'lof', '--disaggregation-mode', 'decode'],
      lof: false,
    },
    {
      name: 'lof on a PD decode with priority scheduling',
      argv: ['--schedule-policy', 'lof', '--disaggregation-mode', 'decode', ...PRIORITY],
      lof: true,
    },
    {
      name: 'lof on a PD prefill',
      argv: ['--schedule-policy', 'lof', '--disaggregation-mode', 'prefill'],
      lof: true,
    },
    { name: 'fcfs (the default)', argv: [], lof: false },
    { name: 'fcfs with priority scheduling', argv: PRIORITY, lof: false },
  ])('$name: $lof', ({ argv, lof }) => {
    expect(engineConfigOf(argv).longestOutputFirst).toBe(lof);
  });
});
