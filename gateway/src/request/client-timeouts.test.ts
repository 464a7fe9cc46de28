import { describe, expect, it } from 'vitest';
import { DEFAULT_CLIENT_TIMEOUTS, parseClientTimeoutFlags } from './client-timeouts.ts';

describe('parseClientTimeoutFlags', () => {
  it('defaults: 60 s to send a request, 600 s idle', () => {
    expect(parseClientTimeoutFlags({})).toEqual({ ok: true, value: DEFAULT_CLIENT_TIMEOUTS });
    expect(parseClientTimeoutFlags({ 'request-timeout-seconds': '5' })).toEqual({
      ok: true,
      value: { requestTimeoutMs: 5000, connectionTimeoutMs: 600_000 },
    });
  });

  it.each([
    [{ 'request-timeout-seconds': 'soon' }, '--request-timeout-seconds: give a number of seconds'],
    [{ 'connection-timeout-seconds': '0' }, '--connection-timeout-seconds: give 1 or more seconds'],
  ])('says which flag to change: %o', (values, error) => {
    expect(parseClientTimeoutFlags(values)).toEqual({ ok: false, error });
  });
});
