import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  buildErrorBody,
  formatMessage,
  GatewayError,
  GatewayErrors,
  type GatewayErrorCode,
} from './index.ts';

const doc = readFileSync(new URL('../../ERRORS.md', import.meta.url), 'utf8');
const documented = new Map(
  [...doc.matchAll(/^### (GW_\w+)\n+Status (\d{3})/gm)].map((m) => [m[1] as string, Number(m[2])]),
);
const codes = Object.keys(GatewayErrors) as GatewayErrorCode[];

describe('error registry', () => {
  it.each(codes)('%s is documented in ERRORS.md with its status', (code) => {
    expect(documented.get(code)).toBe(GatewayErrors[code].status);
  });

  it('ERRORS.md documents no code the registry lacks', () => {
    expect([...documented.keys()].sort()).toEqual([...codes].sort());
  });

  it('formats templates and keeps unknown placeholders visible', () => {
    expect(formatMessage('a {x} b {y}', { x: 1 })).toBe('a 1 b {y}');
  });

  it('builds an OpenAI-shaped body', () => {
    const err = new GatewayError(
      'GW_OVERLOADED',
      { deployment: 'd', retryAfterSeconds: 3 },
      { retryAfterSeconds: 3 },
    );
    expect(err.statusCode).toBe(429);
    expect(buildErrorBody(err)).toEqual({
      error: {
        message: "Deployment 'd' is at its concurrency and queue bound; retry after 3 s",
        type: 'rate_limit_error',
        code: 'GW_OVERLOADED',
      },
    });
  });
});
