import { describe, expect, it } from 'vitest';
import { FEEDBACK_PREFIX, buildPreparedInput } from './prepare.ts';

describe('buildPreparedInput', () => {
  it('sends a prompt unchanged to SGLang', () => {
    expect(buildPreparedInput({ input: { prompt: 'Say hi.' } }, 'sglang')).toEqual({
      ok: true,
      value: { kind: 'text', rendering: 'cacheroute-plain-v1', text: 'Say hi.' },
    });
  });

  // The bug this guards: messages were rendered to SGLang with a home-made
  // "System: …\n\nUser: …\n\nAssistant:" template, not the model's own.
  it("leaves messages to SGLang's own chat template: they go as messages, unrendered", () => {
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'Hi?' },
    ];
    expect(buildPreparedInput({ input: { messages } }, 'sglang')).toEqual({
      ok: true,
      value: { kind: 'messages', messages },
    });
  });

  it('sends a prompt to OpenRouter as one user message', () => {
    expect(buildPreparedInput({ input: { prompt: 'Say hi.' } }, 'openrouter')).toEqual({
      ok: true,
      value: { kind: 'messages', messages: [{ role: 'user', content: 'Say hi.' }] },
    });
  });

  it('appends every rework feedback in order', () => {
    const sg = buildPreparedInput({ input: { prompt: 'P' } }, 'sglang', { feedback: ['a', 'b'] });
    expect(sg.ok && sg.value.kind === 'text' && sg.value.text).toBe(
      `P\n\n${FEEDBACK_PREFIX}a\n\n${FEEDBACK_PREFIX}b`,
    );
    const or = buildPreparedInput({ input: { messages: [{ role: 'user', content: 'P' }] } }, 'openrouter', {
      feedback: ['a'],
    });
    expect(or.ok && or.value.kind === 'messages' && or.value.messages).toEqual([
      { role: 'user', content: 'P' },
      { role: 'user', content: `${FEEDBACK_PREFIX}a` },
    ]);
  });

  it('uses the ConfigMap text the shell read, and fails when it is missing', () => {
    const spec = { input: { configMapRef: { name: 'cm', key: 'k' } } };
    const r = buildPreparedInput(spec, 'sglang', { inputText: 'from cm' });
    expect(r.ok && r.value.kind === 'text' && r.value.text).toBe('from cm');
    const missing = buildPreparedInput(spec, 'sglang');
    expect(missing.ok).toBe(false);
    expect(!missing.ok && missing.error.code).toBe('InputUnavailable');
  });
});
