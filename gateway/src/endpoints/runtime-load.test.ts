import { describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { parseRuntimeMetrics, RuntimeLoadPoller } from './runtime-load.ts';
import { StaticRoutingTable } from '../routing/table.ts';

const sample = `# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="0"} 3.0
sglang:num_queue_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="1"} 2.0
sglang:token_usage{model_name="m",dp_rank="0"} 0.4
sglang:token_usage{model_name="m",dp_rank="1"} 0.7
sglang:num_running_reqs{model_name="m"} 9.0
`;

describe('parseRuntimeMetrics', () => {
  it.each([
    ['sums queues over ranks, takes the busiest KV usage', sample, { queued: 5, tokenUsage: 0.7 }],
    ['PD queues count', 'sglang:num_prefill_bootstrap_queue_reqs{a="b"} 4\n', { queued: 4 }],
    ['decode prealloc queue counts', 'sglang:num_decode_prealloc_queue_reqs{a="b"} 2\n', { queued: 2 }],
    // Regression: a made-up prefill "prealloc" queue was counted, SGLang's bootstrap queue was not.
    [
      'a made-up prefill prealloc queue is not a queue',
      'sglang:num_prefill_prealloc_queue_reqs{a="b"} 4\n',
      undefined,
    ],
    ['nothing known', '# nothing\nother_metric 1\n', undefined],
    // SGLang with --enable-priority-scheduling: the total under priority="", each priority beside it.
    [
      "a queue by priority counts its total once, not each priority's share again",
      'sglang:num_queue_reqs{model_name="m",priority="",dp_rank="0"} 3.0\n' +
        'sglang:num_queue_reqs{model_name="m",priority="1",dp_rank="0"} 2.0\n' +
        'sglang:num_queue_reqs{model_name="m",priority="0",dp_rank="0"} 1.0\n' +
        'sglang:num_queue_reqs{model_name="m",priority="",dp_rank="1"} 4.0\n',
      { queued: 7 },
    ],
  ])('%s', (_name, text, expected) => {
    expect(parseRuntimeMetrics(text)).toEqual(expected);
  });
});

describe('RuntimeLoadPoller', () => {
  it('scrapes ready endpoints on a timer and forgets failures', async () => {
    const clock = new ManualClock();
    const table = new StaticRoutingTable([
      {
        model: 'm',
        deployment: 'ns/m',
        fingerprint: 'f',
        salt: 's',
        routing: RoutingSettings.parse({}),
        admission: Admission.parse({}),
        reuse: ResultReuse.parse({}),
        endpoints: [
          { id: 'a', url: 'http://a:1', role: 'standalone', fingerprint: 'f', verified: true, ready: true },
          { id: 'b', url: 'http://b:1', role: 'standalone', fingerprint: 'f', verified: true, ready: true },
          { id: 'c', url: 'http://c:1', role: 'standalone', fingerprint: 'f', verified: true, ready: false },
        ],
      },
    ]);
    const asked: string[] = [];
    let failB = false;
    const poller = new RuntimeLoadPoller({
      table,
      clock,
      intervalMs: 1000,
      fetchText: (url) => {
        asked.push(url);
        return url.startsWith('http://b') && failB
          ? Promise.reject(new Error('down'))
          : Promise.resolve(sample);
      },
    });
    await poller.scrapeOnce();
    expect(asked.sort()).toEqual(['http://a:1/metrics', 'http://b:1/metrics']);
    expect(poller.get('b')).toEqual({ queued: 5, tokenUsage: 0.7 });
    failB = true;
    await poller.scrapeOnce();
    expect(poller.get('b')).toBeUndefined();
    expect(poller.get('a')).toBeDefined();
    poller.start();
    clock.advance(1000);
    expect(asked).toHaveLength(6);
    poller.stop();
    expect(clock.pendingTimers).toBe(0);
  });
});
