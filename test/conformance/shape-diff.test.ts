// The comparator of the differential suite finds what it is there to find.

import { describe, expect, it } from 'vitest';
import { compareObservations, eventKind } from './differential-compare.ts';
import type { Observation } from './differential-script.ts';
import { diffJson, diffMetricFamilies, parseMetricFamilies } from './shape-diff.ts';

describe('diffJson', () => {
  it.each([
    ['null against an object', { d: null }, { d: { device: 0, host: 0 } }, ['d']],
    ['a key only one side has', { a: 1 }, { a: 1, b: null }, ['b']],
    ['a number against a string', { t: 1 }, { t: '1' }, ['t']],
    ['an object kind', { object: 'chat.completion' }, { object: 'text_completion' }, ['object']],
    ['a request id format', { id: 'a'.repeat(32) }, { id: 'chatcmpl-1' }, ['id']],
  ])('reports %s', (_name, real, sim, paths) => {
    expect(diffJson(real, sim).map((m) => m.path)).toEqual(paths);
  });

  it.each([
    ['text and token ids', { text: 'a', output_ids: [1, 2] }, { text: 'b', output_ids: [3] }],
    ['timings', { e2e_latency: 0.5 }, { e2e_latency: 0.1 }],
    ['two request ids', { id: 'a'.repeat(32) }, { id: 'b'.repeat(32) }],
  ])('leaves %s aside', (_name, real, sim) => {
    expect(diffJson(real, sim)).toEqual([]);
  });
});

describe('diffMetricFamilies', () => {
  const real = parseMetricFamilies(
    [
      '# TYPE sglang:x gauge',
      'sglang:x{engine_type="unified",tp_rank="0"} 1.0',
      '# TYPE sglang:h histogram',
      'sglang:h_bucket{le="1.0",model_name="m"} 1.0',
      'sglang:h_count{model_name="m"} 1.0',
    ].join('\n'),
  );

  it('finds a missing family, a type, a label name and a label value', () => {
    const sim = parseMetricFamilies(
      [
        '# TYPE sglang:x gauge',
        'sglang:x{engine_type="prefill",pp_rank="0"} 1',
        '# TYPE sglang:h gauge',
        'sglang:h{model_name="m"} 1',
        '# TYPE sglang:y counter',
        'sglang:y 1',
      ].join('\n'),
    );
    expect(diffMetricFamilies(real, sim, '', { valueLabels: ['engine_type'] }).map((m) => m.path)).toEqual([
      'sglang:h type',
      'sglang:x labels',
      'sglang:x{engine_type}',
      'sglang:y',
    ]);
  });

  it('takes the same families as equal', () => {
    expect(diffMetricFamilies(real, real, '', { valueLabels: ['le', 'engine_type'] })).toEqual([]);
  });
});

describe('compareObservations', () => {
  const obs = (name: string, body: unknown, events?: unknown[]): Observation => ({
    name,
    status: 200,
    contentType: 'application/json',
    body,
    ...(events ? { events } : {}),
  });

  it('compares stream chunk kinds: a role-only first chunk the simulator lacks', () => {
    const role = { choices: [{ delta: { role: 'assistant', content: '' }, finish_reason: null }] };
    const content = { choices: [{ delta: { content: 'x' }, finish_reason: null }] };
    const finish = { choices: [{ delta: {}, finish_reason: 'length' }] };
    expect([role, content, finish, '[DONE]'].map(eventKind)).toEqual(['role', 'content', 'finish', 'done']);
    const real = new Map([['s', obs('s', null, [role, content, content, finish, '[DONE]'])]]);
    const sim = new Map([
      [
        's',
        obs('s', null, [
          { ...role, choices: [{ ...role.choices[0], delta: { role: 'assistant', content: 'x' } }] },
          finish,
          '[DONE]',
        ]),
      ],
    ]);
    expect(compareObservations(real, sim).map((m) => m.path)).toContain('s chunks');
  });

  it('holds the cache expectations on both sides', () => {
    const hit = obs('cache_repeat', { meta_info: { cached_tokens: 5 } });
    const miss = obs('cache_repeat', { meta_info: { cached_tokens: 0 } });
    const found = compareObservations(new Map([['cache_repeat', hit]]), new Map([['cache_repeat', miss]]));
    expect(found.map((m) => m.path)).toEqual(['cache_repeat cached_tokens > 0']);
  });
});
