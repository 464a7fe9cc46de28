import { afterEach, describe, expect, it } from 'vitest';
import { authLevelOf, decideRequestAuth } from './auth.ts';
import { postJson, startSim, type RunningSim } from '../support/sim/testing.ts';

let sim: RunningSim | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

describe('API keys (--api-key, --admin-api-key)', () => {
  it('a server started with --api-key refuses requests without the key, as SGLang does, and leaves probes open', async () => {
    sim = await startSim([
      '--model-path',
      'm',
      '--enable-metrics',
      '--api-key',
      'sk-runtime',
      '--admin-api-key',
      'sk-admin',
    ]);
    const body = { text: 'hi', sampling_params: { max_new_tokens: 1 } };
    const bare = await postJson(`${sim.url}/generate`, body);
    expect(bare).toMatchObject({ status: 401, json: { error: 'Unauthorized' } });
    const wrong = await postJson(`${sim.url}/generate`, body, { authorization: 'Bearer sk-other' });
    expect(wrong.status).toBe(401);
    const ok = await postJson(`${sim.url}/generate`, body, { authorization: 'Bearer sk-runtime' });
    expect(ok.status).toBe(200);
    // Unknown paths are refused before they are looked up.
    expect((await fetch(`${sim.url}/nope`)).status).toBe(401);
    for (const open of ['/health', '/health_generate', '/metrics'])
      expect((await fetch(`${sim.url}${open}`)).status).toBe(200);
    // An admin-optional route takes the admin key where one is set, not the API key.
    const flush = (key: string) =>
      fetch(`${sim?.url ?? ''}/flush_cache`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
    expect((await flush('sk-runtime')).status).toBe(401);
    expect((await flush('sk-admin')).status).toBe(200);
  });

  it('without keys every path is open', () => {
    expect(decideRequestAuth({ method: 'POST', path: '/generate', level: 'normal' }).allowed).toBe(true);
    expect(authLevelOf('/dumper/start')).toBe('admin_optional');
    expect(authLevelOf('/dumper/a/b')).toBe('normal');
  });
});
