import { describe, expect, it } from 'vitest';
import { ServedApi } from './served-api.ts';

describe('ServedApi', () => {
  it('asks again at every pass while the API is missing, and trusts a seen one for a while', async () => {
    let served = false;
    let asked = 0;
    let now = 0;
    const api = new ServedApi(
      () => {
        asked++;
        return Promise.resolve(served);
      },
      () => now,
    );
    expect(await api.available('ns')).toBe(false);
    expect(await api.available('ns')).toBe(false);
    expect(asked).toBe(2);
    served = true;
    expect(await api.available('ns')).toBe(true);
    now += 60_000;
    expect(await api.available('ns')).toBe(true);
    expect(asked).toBe(3);
    api.forget();
    served = false;
    expect(await api.available('ns')).toBe(false);
  });
});
