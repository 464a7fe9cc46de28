import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerTaskMetrics, type TaskLike } from './metrics.ts';

const task = (namespace: string, phase?: string, cost?: string): TaskLike => ({
  metadata: { namespace },
  status: { ...(phase ? { phase } : {}), ...(cost ? { cost } : {}) },
});

describe('registerTaskMetrics', () => {
  it('counts Tasks by namespace and phase and sums their recorded cost, at scrape time', async () => {
    const tasks: TaskLike[] = [
      task('a', 'Succeeded', '0.25'),
      task('a', 'Succeeded', '0.5'),
      task('a'), // no status yet: Pending
      task('b', 'Failed', 'not a number'),
    ];
    const registry = new Registry();
    let lists = 0;
    registerTaskMetrics(registry, {
      list: () => {
        lists++;
        return tasks;
      },
    });
    const text = await registry.metrics();
    expect(lists).toBe(1); // one summary per scrape, for both gauges
    expect(text).toContain('cacheroute_tasks{namespace="a",phase="Succeeded"} 2');
    expect(text).toContain('cacheroute_tasks{namespace="a",phase="Pending"} 1');
    expect(text).toContain('cacheroute_tasks{namespace="a",phase="Running"} 0');
    expect(text).toContain('cacheroute_tasks{namespace="b",phase="Failed"} 1');
    expect(text).toContain('cacheroute_task_cost{namespace="a"} 0.75');
    expect(text).not.toContain('cacheroute_task_cost{namespace="b"}');

    // A Task deleted since: the next scrape no longer counts it.
    tasks.splice(0, 2);
    const after = await registry.metrics();
    expect(lists).toBe(2);
    expect(after).toContain('cacheroute_tasks{namespace="a",phase="Succeeded"} 0');
    expect(after).not.toContain('cacheroute_task_cost{namespace="a"}');
  });
});
