import { describe, expect, it } from 'vitest';
import { buildRuntimeKeys } from './runtime-keys.ts';

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const secret = (
  namespace: string,
  name: string,
  labels: Record<string, string>,
  data: Record<string, string>,
) => ({
  metadata: { namespace, name, labels: { 'cacheroute.dev/runtime-api-key': 'true', ...labels } },
  data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
});

describe('buildRuntimeKeys', () => {
  it("maps each Deployment's fingerprints to their keys, decoded", () => {
    const built = buildRuntimeKeys([
      secret(
        'team-a',
        'llama-runtime-api-key',
        { 'cacheroute.dev/deployment': 'llama' },
        { f1: 'k1', f2: 'k2' },
      ),
      secret('team-b', 'llama-runtime-api-key', { 'cacheroute.dev/deployment': 'llama' }, { f1: 'kb' }),
    ]);
    expect(built.issues).toEqual([]);
    expect([...built.keys].map(([d, m]) => [d, Object.fromEntries(m)])).toEqual([
      ['team-a/llama', { f1: 'k1', f2: 'k2' }],
      ['team-b/llama', { f1: 'kb' }],
    ]);
  });

  it('takes a Secret only under the name the operator gives its Deployment, and names the rest without a key', () => {
    const built = buildRuntimeKeys([
      // Labelled for llama by someone else: it must not decide what llama's runtimes are sent.
      secret('team-a', 'impostor', { 'cacheroute.dev/deployment': 'llama' }, { f1: 'bad-key' }),
      secret('team-a', 'other-runtime-api-key', {}, { f1: 'bad-key' }),
      'not an object',
    ]);
    expect(built.keys.size).toBe(0);
    expect(built.issues).toEqual([
      {
        secret: 'team-a/impostor',
        reason: 'not the key Secret of Deployment llama (llama-runtime-api-key)',
      },
      { secret: 'team-a/other-runtime-api-key', reason: 'no cacheroute.dev/deployment label' },
    ]);
    expect(JSON.stringify(built.issues)).not.toContain('bad-key');
  });
});
