import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';
import { findBinDir } from './binaries.ts';
import { buildReadyPatch, computeGatedReady } from './kubelet-readiness.ts';
import {
  MINIMUM_GRACE_AFTER_PRESTOP_MS,
  planTermination,
  runTermination,
  type TerminatingRuntime,
} from './kubelet-termination.ts';
import { buildStagesWithReadinessGates } from './kwok-stages.ts';

const GATE = 'cacheroute.dev/verified';

function pod(conditions: { type: string; status: string; reason?: string }[], gated = true): PodObject {
  return {
    metadata: { name: 'p' },
    spec: {
      containers: [{ name: 'sglang', lifecycle: { preStop: { sleep: { seconds: 10 } } } }],
      terminationGracePeriodSeconds: 60,
      ...(gated ? { readinessGates: [{ conditionType: GATE }] } : {}),
    },
    status: { conditions: conditions },
  };
}

describe('computeGatedReady', () => {
  it('is Ready only with the containers ready and every gate True', () => {
    expect(computeGatedReady(pod([{ type: 'ContainersReady', status: 'True' }]))).toMatchObject({
      status: 'False',
      reason: 'ReadinessGatesNotReady',
    });
    expect(
      computeGatedReady(
        pod([
          { type: 'ContainersReady', status: 'True' },
          { type: GATE, status: 'True' },
        ]),
      )?.status,
    ).toBe('True');
    expect(
      computeGatedReady(
        pod([
          { type: 'ContainersReady', status: 'False' },
          { type: GATE, status: 'True' },
        ]),
      )?.reason,
    ).toBe('ContainersNotReady');
    expect(computeGatedReady(pod([], false))).toBeUndefined();
  });

  it('patches only a Ready that differs', () => {
    const p = pod([{ type: 'Ready', status: 'False', reason: 'ReadinessGatesNotReady' }]);
    const now = new Date();
    expect(
      buildReadyPatch(p, { type: 'Ready', status: 'False', reason: 'ReadinessGatesNotReady' }, now),
    ).toBe(undefined);
    expect(buildReadyPatch(p, { type: 'Ready', status: 'True' }, now)).toBeDefined();
  });
});

describe('planTermination', () => {
  it("takes the deletion's grace first seen, else the pod's, and caps preStop by it", () => {
    expect(planTermination(pod([]), 'sglang')).toEqual({ preStopMs: 10_000, graceMs: 60_000 });
    expect(planTermination(pod([]), 'sglang', 4)).toEqual({ preStopMs: 4_000, graceMs: 4_000 });
  });
});

describe('runTermination', () => {
  /** A runtime that records the signals it gets and exits on SIGTERM after `exitMs` (never: undefined). */
  function recorder(exitMs: number | undefined): TerminatingRuntime & { calls: string[] } {
    const calls: string[] = [];
    return {
      calls,
      sigterm: () => {
        calls.push('TERM');
        return exitMs === undefined
          ? new Promise<void>(() => undefined)
          : new Promise((r) => setTimeout(r, exitMs));
      },
      sigkill: () => {
        calls.push('KILL');
        return Promise.resolve();
      },
    };
  }

  it('sends SIGTERM after preStop and reports an exit on its own', async () => {
    const runtime = recorder(5);
    const outcome = await runTermination(
      { preStopMs: 5, graceMs: 1_000 },
      runtime,
      new AbortController().signal,
    );
    expect(outcome).toBe('exited');
    expect(runtime.calls).toEqual(['TERM', 'KILL']);
  });

  it('SIGKILLs a runtime that does not exit once the grace is over, leaving it the minimum after preStop', async () => {
    // Fake timers: the minimum is checked at the millisecond, not timed on a loaded machine.
    vi.useFakeTimers();
    onTestFinished(() => void vi.useRealTimers());
    const runtime = recorder(undefined);
    const outcome = runTermination({ preStopMs: 10, graceMs: 10 }, runtime, new AbortController().signal);
    await vi.advanceTimersByTimeAsync(10);
    expect(runtime.calls).toEqual(['TERM']);
    // The 10 ms grace is long over, yet the runtime keeps the minimum after preStop.
    await vi.advanceTimersByTimeAsync(MINIMUM_GRACE_AFTER_PRESTOP_MS - 1);
    expect(runtime.calls).toEqual(['TERM']);
    await vi.advanceTimersByTimeAsync(1);
    expect(await outcome).toBe('killed');
    expect(runtime.calls).toEqual(['TERM', 'KILL']);
  });

  it('kills at once when the kubelet stops', async () => {
    const runtime = recorder(undefined);
    const abort = new AbortController();
    const running = runTermination({ preStopMs: 60_000, graceMs: 60_000 }, runtime, abort.signal);
    abort.abort();
    expect(await running).toBe('killed');
    expect(runtime.calls).toEqual(['KILL']);
  });
});

// The stage file `make controlplane` writes beside the binaries: checked where it is there.
const STAGES = join(dirname(findBinDir([])), 'kwok-stages.yaml');

describe.runIf(existsSync(STAGES))("KWOK's pod-ready stage", () => {
  it('leaves a gated pod not Ready and its gates unset', () => {
    const original = readFileSync(STAGES, 'utf8');
    const changed = buildStagesWithReadinessGates(original);
    expect(original).toContain('range .spec.readinessGates');
    expect(changed).not.toContain('range .spec.readinessGates');
    expect(changed).toContain('status: {{ if .spec.readinessGates }}"False"{{ else }}"True"{{ end }}');
  });
});
