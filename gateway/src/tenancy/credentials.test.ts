import { describe, expect, it } from 'vitest';
import { readPresentedKey } from './credentials.ts';

describe('readPresentedKey', () => {
  it('takes `Bearer <key>`, case-insensitive scheme, surrounding blanks allowed', () => {
    expect(readPresentedKey({ authorization: 'Bearer abc' })).toEqual({ ok: true, key: 'abc' });
    expect(readPresentedKey({ authorization: 'bearer \tabc ' })).toEqual({ ok: true, key: 'abc' });
  });

  it('refuses a missing key, another scheme, and a key with spaces', () => {
    for (const authorization of [undefined, '', 'Basic abc', 'Bearer', 'Bearer a b'])
      expect(readPresentedKey(authorization === undefined ? {} : { authorization }).ok).toBe(false);
  });

  it('refuses several Authorization headers, which Node would read as the first', () => {
    const raw = ['Authorization', 'Bearer good', 'content-type', 'x', 'authorization', 'Bearer other'];
    expect(readPresentedKey({ authorization: 'Bearer good' }, raw)).toEqual({
      ok: false,
      reason: 'send one Authorization header, not several',
    });
  });
});
