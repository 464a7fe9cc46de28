import { describe, expect, it } from 'vitest';
import { digestApiKey, GATEWAY_KEYS_DATA } from '#api/gateway-keys.ts';
import { readKeptKeys } from './gateway-keys-secret.ts';
import { buildRuntimeKeys } from './runtime-keys.ts';

const WHERE = { namespace: 'gw', name: 'keys' };
const b64 = (doc: unknown): string => Buffer.from(JSON.stringify(doc)).toString('base64');
const kept = (data: Record<string, string>, name = 'keys') => ({ metadata: { namespace: 'gw', name }, data });

describe('readKeptKeys', () => {
  it('reads both documents of the kept Secret', () => {
    const digests = { 'team-a/a-keys': { k: digestApiKey('x'.repeat(32)) } };
    const runtime = { 'team-a/llama': { f1: 'k1' } };
    const keys = readKeptKeys(
      [
        kept({
          [GATEWAY_KEYS_DATA.apiKeyDigests]: b64(digests),
          [GATEWAY_KEYS_DATA.runtimeKeys]: b64(runtime),
        }),
      ],
      WHERE,
    );
    expect(keys).toEqual({ apiKeyDigests: digests, runtimeKeys: runtime, problem: undefined });
    const built = buildRuntimeKeys(keys.runtimeKeys);
    expect(built.keys.get('team-a/llama')?.get('f1')).toBe('k1');
  });

  it('says which flag writes it when it is absent, and which document does not parse', () => {
    expect(readKeptKeys([kept({}, 'another')], WHERE).problem).toContain('--gateway-keys-secret gw/keys');
    const bad = readKeptKeys(
      [kept({ [GATEWAY_KEYS_DATA.apiKeyDigests]: b64({ 'a/b': { k: { sha256: 'short' } } }) })],
      WHERE,
    );
    expect(bad.apiKeyDigests).toEqual({});
    expect(bad.problem).toContain(
      `no readable ${GATEWAY_KEYS_DATA.apiKeyDigests}, ${GATEWAY_KEYS_DATA.runtimeKeys}`,
    );
  });
});
