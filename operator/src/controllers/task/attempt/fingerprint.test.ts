import { describe, expect, it } from 'vitest';
import { canonicalJson, computeTaskFingerprint, type FingerprintInput } from './fingerprint.ts';
import { OPENROUTER_IDENTITY } from '../../../../../test/support/operator/task.ts';

const sglang: FingerprintInput = {
  prepared: { kind: 'text', rendering: 'cacheroute-plain-v1', text: 'hello' },
  sampling: { temperature: 0 },
  maxNewTokens: 64,
  checks: [{ name: 'c', type: 'Length', max: 100 }],
  provider: {
    provider: 'sglang',
    deploymentId: 'llama-a',
    identityFingerprint: 'abcd',
    cacheSalt: 'salt-1',
    runtime: {
      modelPath: 'm',
      servedModelName: 'm',
      tokenizerPath: 't',
      version: '0.5.23',
      tensorParallel: 1,
    },
  },
};

const openrouter: FingerprintInput = {
  ...sglang,
  prepared: { kind: 'messages', messages: [{ role: 'user', content: 'hello' }] },
  provider: OPENROUTER_IDENTITY,
};

const base = computeTaskFingerprint(sglang);

describe('canonicalJson', () => {
  it('sorts keys at every level and drops undefined', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: undefined }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[1,{"z":1}]},"b":1}',
    );
  });
});

describe('computeTaskFingerprint', () => {
  it('is sha256 and stable under key order', () => {
    expect(base).toMatch(/^sha256:[a-f0-9]{64}$/);
    const reordered = {
      provider: sglang.provider,
      checks: sglang.checks,
      maxNewTokens: 64,
      sampling: sglang.sampling,
      prepared: sglang.prepared,
    };
    expect(computeTaskFingerprint(reordered)).toBe(base);
  });

  it.each<[string, (f: FingerprintInput) => FingerprintInput]>([
    [
      'prepared text',
      (f) => ({ ...f, prepared: { kind: 'text', rendering: 'cacheroute-plain-v1', text: 'hello!' } }),
    ],
    ['temperature', (f) => ({ ...f, sampling: { temperature: 0.5 } })],
    ['topP', (f) => ({ ...f, sampling: { temperature: 0, topP: 0.9 } })],
    ['topK', (f) => ({ ...f, sampling: { temperature: 0, topK: 5 } })],
    ['seed', (f) => ({ ...f, sampling: { temperature: 0, seed: 1 } })],
    ['stop', (f) => ({ ...f, sampling: { temperature: 0, stop: ['\n'] } })],
    ['output cap', (f) => ({ ...f, maxNewTokens: 65 })],
    ['checks', (f) => ({ ...f, checks: [{ name: 'c', type: 'Length', max: 99 }] })],
    [
      'deploymentId',
      (f) => ({
        ...f,
        provider: { ...sglang.provider, deploymentId: 'llama-b' } as FingerprintInput['provider'],
      }),
    ],
    [
      'identity fingerprint',
      (f) => ({
        ...f,
        provider: { ...sglang.provider, identityFingerprint: 'abce' } as FingerprintInput['provider'],
      }),
    ],
    [
      'cache salt',
      (f) => ({
        ...f,
        provider: { ...sglang.provider, cacheSalt: 'salt-2' } as FingerprintInput['provider'],
      }),
    ],
    [
      'runtime version',
      (f) => ({
        ...f,
        provider: {
          ...sglang.provider,
          runtime: { ...(sglang.provider as { runtime: object }).runtime, version: '0.5.24' },
        } as FingerprintInput['provider'],
      }),
    ],
    [
      'runtime tokenizer',
      (f) => ({
        ...f,
        provider: {
          ...sglang.provider,
          runtime: { ...(sglang.provider as { runtime: object }).runtime, tokenizerPath: 't2' },
        } as FingerprintInput['provider'],
      }),
    ],
    ['provider kind', () => openrouter],
  ])('changes with %s', (_name, change) => {
    expect(computeTaskFingerprint(change(sglang))).not.toBe(base);
  });

  const orBase = computeTaskFingerprint(openrouter);
  it.each<[string, Partial<Extract<FingerprintInput['provider'], { provider: 'openrouter' }>>]>([
    ['model', { model: 'openai/gpt-4.1' }],
    ['upstream provider', { upstreamProvider: 'azure' }],
    ['cache write contract', { cacheWriteUsage: 'required' }],
    ['input reservation', { inputTokenUpperBound: 4096 }],
    ['base URL', { baseUrl: 'http://127.0.0.1:1/api/v1' }],
  ])('changes with OpenRouter %s', (_name, change) => {
    const provider = { ...openrouter.provider, ...change } as FingerprintInput['provider'];
    expect(computeTaskFingerprint({ ...openrouter, provider })).not.toBe(orBase);
  });

  it('ignores a check name (not part of what the answer must satisfy)', () => {
    expect(
      computeTaskFingerprint({ ...sglang, checks: [{ name: 'renamed', type: 'Length', max: 100 }] }),
    ).toBe(base);
  });

  it('treats no checks and an empty list alike', () => {
    expect(computeTaskFingerprint({ ...sglang, checks: undefined })).toBe(
      computeTaskFingerprint({ ...sglang, checks: [] }),
    );
  });
});
