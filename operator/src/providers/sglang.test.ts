import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type RunningSim } from '../../../test/sim/testing.ts';
import { planTaskStep, type GenerateCall } from '../controllers/task/phase.ts';
import type { TaskTarget } from '../controllers/task/target.ts';
import { buildTask } from '../controllers/task/testing.ts';
import { generateWithSglang } from './sglang.ts';

const KEY = 'k'.repeat(64);

describe('generateWithSglang on a runtime started with --api-key', () => {
  let sim: RunningSim;
  beforeAll(async () => {
    sim = await startSim(['--model-path', 'm', '--enable-cache-report', '--api-key', KEY]);
  });
  afterAll(() => sim.close());

  function call(): GenerateCall {
    const target: Extract<TaskTarget, { provider: 'sglang' }> = {
      provider: 'sglang',
      identity: {
        provider: 'sglang',
        deploymentId: 'd',
        identityFingerprint: 'f1',
        cacheSalt: 's',
        runtime: {
          modelPath: 'm',
          servedModelName: 'm',
          tokenizerPath: 'm',
          version: '0.5.23',
          tensorParallel: 1,
        },
      },
      route: { kind: 'standalone', urls: [sim.url] },
    };
    let task = buildTask({ name: 't', spec: { input: { prompt: 'Say hello.' }, maxOutputTokens: 4 } });
    // The phases before the call (fingerprint, input) each take a step.
    for (let i = 0; i < 8; i++) {
      const step = planTaskStep(task, { target: { ok: true, value: target }, candidates: [] }, new Date(0));
      const gen = step.actions.find((a) => a.type === 'generate');
      if (gen?.type === 'generate') return gen.call;
      task = { ...task, status: step.status };
    }
    throw new Error('no generate action');
  }

  it('sends the key and gets an answer', async () => {
    const outcome = await generateWithSglang(call(), { apiKey: KEY });
    expect(outcome).toMatchObject({ ok: true, value: { inputTokens: expect.any(Number) } });
  });

  it('without the key the runtime refuses it (401), and no key is in the error', async () => {
    expect(await generateWithSglang(call(), {})).toMatchObject({
      ok: false,
      error: { code: 'HTTP401', message: 'POST /tokenize: HTTP 401' },
    });
    const wrong = 'w'.repeat(64);
    const refused = await generateWithSglang(call(), { apiKey: wrong });
    expect(JSON.stringify(refused)).not.toContain(wrong);
  });
});
