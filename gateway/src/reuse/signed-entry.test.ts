import { describe, expect, it } from 'vitest';
import { EntrySigner } from './signed-entry.ts';

const key = (c: string) => Buffer.from(c.repeat(32));
const signer = new EntrySigner({ current: key('a') });
const NOW = 1_700_000_000_000;
const json = '{"status":200,"contentType":"application/json","body":"{}"}';

describe('EntrySigner', () => {
  it('opens what it sealed, for the key it sealed it under, until it expires', () => {
    const sealed = signer.seal('p:k1', json, NOW + 1000);
    expect(signer.open('p:k1', sealed, NOW)).toEqual({ ok: true, json });
    expect(signer.open('p:k1', sealed, NOW + 1000)).toEqual({ ok: false, reason: 'expired' });
  });

  it('refuses an entry moved to another key, a changed body, a changed expiry, another key', () => {
    const sealed = signer.seal('p:k1', json, NOW + 1000);
    expect(signer.open('p:k2', sealed, NOW)).toEqual({ ok: false, reason: 'signature' });
    expect(signer.open('p:k1', sealed.replace('{}', '{"x":1}'), NOW)).toEqual({
      ok: false,
      reason: 'signature',
    });
    expect(signer.open('p:k1', sealed.replace(String(NOW + 1000), String(NOW + 9000)), NOW)).toEqual({
      ok: false,
      reason: 'signature',
    });
    expect(new EntrySigner({ current: key('b') }).open('p:k1', sealed, NOW)).toEqual({
      ok: false,
      reason: 'signature',
    });
  });

  it('refuses what is not an envelope (what a writer without the key writes)', () => {
    for (const planted of [json, 'cr1.', `cr1.${NOW}.short.${json}`, `cr1.x.${'A'.repeat(43)}.${json}`])
      expect(signer.open('p:k1', planted, NOW)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('accepts the previous key for reading while it signs with the current one (rotation)', () => {
    const old = new EntrySigner({ current: key('a') });
    const rotated = new EntrySigner({ current: key('b'), previous: key('a') });
    expect(rotated.open('p:k', old.seal('p:k', json, NOW + 1), NOW)).toEqual({ ok: true, json });
    const fresh = rotated.seal('p:k', json, NOW + 1);
    expect(new EntrySigner({ current: key('b') }).open('p:k', fresh, NOW)).toEqual({ ok: true, json });
    expect(old.open('p:k', fresh, NOW)).toEqual({ ok: false, reason: 'signature' });
  });

  it('refuses a key shorter than 32 bytes', () => {
    expect(() => new EntrySigner({ current: Buffer.from('short') })).toThrow('at least 32 bytes');
  });
});
