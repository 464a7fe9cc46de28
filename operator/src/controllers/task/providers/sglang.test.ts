import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type RunningSim } from '../../../../../test/support/sim/testing.ts';
import type { GenerateCall } from '../attempt/call.ts';
import { planTaskStep } from '../phase.ts';
import type { TaskTarget } from '../attempt/target.ts';
import { buildTask } from '../../../../../test/support/operator/task.ts';
import type { TaskSpec } from '#api/task.ts';
import { generateWithSglang } from './sglang.ts';

const KEY = 'k'.repeat(64);

describe('generateWithSglang on a runtime started with --api-key', () => {
  let sim: RunningSim;
  beforeAll(async () => {
    sim = await startSim(['--model-path', 'm', '--enable-cache-report', '--api-key', KEY]);
  });
  afterAll(() => sim.close());

  function call(input: TaskSpec['input'] = { prompt: 'Say hello.' }): GenerateCall {
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
    let task = buildTask({ name: 't', spec: { input, maxOutputTokens: 4 } });
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

  // The bug this guards: a Task's messages reached SGLang through a home-made
  // "System: …" rendering, which neither the model's template nor the gateway's chat
  // requests (rendered by the runtime) ever produce, so they never shared a prefix.
  it("renders messages with the runtime's own chat template: the prefix a chat request cached is reused", async () => {
    const system = {
      role: 'system' as const,
      content: 'You answer from the handbook: ' + 'cache '.repeat(4),
    };
    const chat = await fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ messages: [system], max_completion_tokens: 1, cache_salt: 's' }),
    });
    const warm = ((await chat.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
    const outcome = await generateWithSglang(call({ messages: [system, { role: 'user', content: 'Hi?' }] }), {
      apiKey: KEY,
    });
    expect(outcome).toMatchObject({ ok: true });
    if (!outcome.ok) return;
    // The system message's tokens are cached; only the user turn and the cue are new.
    expect(outcome.value.usage.cachedTokens).toBe(warm - 1);
    expect(outcome.value.inputTokens).toBeGreaterThan(warm);
  });
});
