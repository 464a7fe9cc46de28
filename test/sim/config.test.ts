import { describe, expect, it } from 'vitest';
import { buildEngineConfig, parseSimArgs } from './config.ts';

const PRIORITY = ['--enable-priority-scheduling', '--disable-priority-preemption'];

function engineConfigOf(argv: readonly string[]) {
  const parsed = parseSimArgs(['--model-path', 'm', ...argv]);
  if (!parsed.ok) throw new Error(parsed.error);
  return buildEngineConfig(parsed.value);
}

describe("buildEngineConfig: the policy SGLang's scheduler runs (SchedulePolicy._validate_and_adjust_policy)", () => {
  it.each([
    { name: 'lof', argv: ['--schedule-policy', 'lof'], runs: 'lof' },
    { name: 'lof with priority scheduling', argv: ['--schedule-policy', 'lof', ...PRIORITY], runs: 'lof' },
    // lof is cache-agnostic: _validate_and_adjust_policy keeps it with the tree cache disabled.
    {
      name: 'lof, radix cache off',
      argv: ['--schedule-policy', 'lof', '--disable-radix-cache'],
      runs: 'lof',
    },
    // A PD decode calls calc_priority only with priority scheduling (_get_new_prebuilt_batch).
    {
      name: 'lof on a PD decode',
      argv: ['--schedule-policy', 'lof', '--disaggregation-mode', 'decode'],
      runs: 'fcfs',
    },
    {
      name: 'lof on a PD decode with priority scheduling',
      argv: ['--schedule-policy', 'lof', '--disaggregation-mode', 'decode', ...PRIORITY],
      runs: 'lof',
    },
    {
      name: 'lof on a PD prefill',
      argv: ['--schedule-policy', 'lof', '--disaggregation-mode', 'prefill'],
      runs: 'lof',
    },
    { name: 'fcfs (the default)', argv: [], runs: 'fcfs' },
    { name: 'fcfs with priority scheduling', argv: PRIORITY, runs: 'fcfs' },
    ...['lpm', 'dfs-weight', 'hrrn'].flatMap((policy) => [
      { name: policy, argv: ['--schedule-policy', policy], runs: policy },
      // Cache-aware: fcfs with the tree cache disabled.
      {
        name: `${policy}, radix cache off`,
        argv: ['--schedule-policy', policy, '--disable-radix-cache'],
        runs: 'fcfs',
      },
    ]),
    ...['random', 'routing-key'].flatMap((policy) => [
      { name: policy, argv: ['--schedule-policy', policy], runs: policy },
      {
        name: `${policy}, radix cache off`,
        argv: ['--schedule-policy', policy, '--disable-radix-cache'],
        runs: policy,
      },
      {
        name: `${policy} on a PD decode`,
        argv: ['--schedule-policy', policy, '--disaggregation-mode', 'decode'],
        runs: 'fcfs',
      },
    ]),
  ])('$name: $runs', ({ argv, runs }) => {
    expect(engineConfigOf(argv).schedulePolicy).toBe(runs);
  });

  it('seeds random from --random-seed, else 0', () => {
    expect(engineConfigOf(['--schedule-policy', 'random', '--random-seed', '7']).randomSeed).toBe(7);
    expect(engineConfigOf(['--schedule-policy', 'random']).randomSeed).toBe(0);
  });
});

describe('parseSimArgs: the --schedule-policy values a server does not run', () => {
  it.each([
    // A choice of the flag, but no SchedulePolicy: SGLang's scheduler raises as it starts.
    { argv: ['--schedule-policy', 'priority'], error: "Unknown schedule_policy: policy='priority'" },
    {
      argv: ['--schedule-policy', 'shortest-prefill-first', '--disable-radix-cache'],
      error:
        /^Unknown schedule_policy: policy='shortest-prefill-first' \(during: Experimental shortest-prefill-first requires prefix caching\)$/,
    },
    {
      argv: ['--schedule-policy', 'shortest-prefill-first'],
      error: /shortest-prefill-first: the simulator does not model this policy/,
    },
  ])('refuses $argv', ({ argv, error }) => {
    const parsed = parseSimArgs(['--model-path', 'm', ...argv]);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error).toMatch(error);
  });
});
