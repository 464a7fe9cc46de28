// The simulator's API-key checks (test/sim/auth.ts) against SGLang's own:
// decide_request_auth from sglang/srt/utils/auth.py on every case of a
// matrix (methods, paths, Authorization headers, which keys are set), and the
// routes the pinned http_server.py marks ADMIN_OPTIONAL.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ADMIN_OPTIONAL_ROUTES, authLevelOf, decideRequestAuth, type AuthCase } from '../sim/auth.ts';
import { recordConformance } from '../support/conformance-report.ts';
import { runKit } from '../support/sglang-kit.ts';

const KitAnswer = z.object({
  decisions: z.array(z.object({ allowed: z.boolean(), status: z.number() })),
  admin_optional: z.array(z.string()),
});

function buildCases(): AuthCase[] {
  const paths = [
    '/generate',
    '/v1/chat/completions',
    '/flush_cache',
    '/abort_request',
    '/dumper/start',
    '/health',
    '/health_generate',
    '/ready',
    '/metrics',
    '/not-a-route',
  ];
  const headers = [
    undefined,
    'Bearer k',
    'bearer k',
    'BEARER a',
    'Bearer a',
    'Bearer  k',
    'Basic k',
    'Bearer',
    'Bearer k2',
    '',
  ];
  const keys: [string | null, string | null][] = [
    [null, null],
    ['k', null],
    [null, 'a'],
    ['k', 'a'],
  ];
  const cases: AuthCase[] = [];
  for (const method of ['GET', 'POST', 'OPTIONS'])
    for (const path of paths)
      for (const authorization of headers)
        for (const [apiKey, adminApiKey] of keys)
          cases.push({ method, path, authorization, apiKey, adminApiKey, level: authLevelOf(path) });
  return cases;
}

describe("API keys: the simulator decides as SGLang's middleware does", () => {
  it('on every case of the matrix, with the same admin-optional routes', async () => {
    const cases = buildCases();
    const input = JSON.stringify({
      cases: cases.map((c) => ({
        method: c.method,
        path: c.path,
        authorization: c.authorization ?? null,
        api_key: c.apiKey,
        admin_api_key: c.adminApiKey,
        level: c.level,
      })),
    });
    const answer = KitAnswer.parse(
      JSON.parse((await runKit(['auth'], input)).trim().split('\n').at(-1) ?? ''),
    );
    const disagreements = cases.flatMap((c, i) => {
      const theirs = answer.decisions[i];
      const ours = decideRequestAuth(c);
      const same =
        theirs && theirs.allowed === ours.allowed && (ours.allowed || theirs.status === ours.status);
      return same ? [] : [{ case: c, ours, theirs }];
    });
    recordConformance('auth', { specs_checked: cases.length, disagreements: disagreements.length });
    expect(answer.decisions).toHaveLength(cases.length);
    expect(disagreements).toEqual([]);
    expect([...ADMIN_OPTIONAL_ROUTES].sort()).toEqual(answer.admin_optional);
    // The matrix reaches every outcome.
    expect(new Set(cases.map((c) => decideRequestAuth(c).allowed))).toEqual(new Set([true, false]));
  });
});
