import { describe, expect, it } from 'vitest';
import { toGatewayError } from './rejection.ts';

describe('toGatewayError', () => {
  it.each([
    [
      { code: 'overloaded', retryAfterSeconds: 3 } as const,
      429,
      'GW_OVERLOADED',
      3,
      "'ns/m' is at its concurrency",
    ],
    [{ code: 'queue-timeout', retryAfterSeconds: 2 } as const, 503, 'GW_QUEUE_TIMEOUT', 2, 'waited 30000 ms'],
    [{ code: 'draining' } as const, 503, 'GW_DRAINING', 1, "Deployment 'ns/m' is draining; retry after 1 s"],
    [{ code: 'aborted' } as const, 499, 'GW_CLIENT_CLOSED', undefined, 'closed the connection'],
  ])('%o → %i %s', (rejection, status, code, retryAfter, words) => {
    const err = toGatewayError(rejection, 'ns/m', 30_000);
    expect(err).toMatchObject({ statusCode: status, code, retryAfterSeconds: retryAfter });
    expect(err.message).toContain(words);
  });
});
