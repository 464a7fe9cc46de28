import { describe, expect, it } from 'vitest';
import { OutputLengthModel } from './output-length-model.ts';

describe('OutputLengthModel', () => {
  it('says nothing before 8 answers', () => {
    const m = new OutputLengthModel();
    for (let i = 0; i < 7; i++) m.learn(100, 100);
    expect(m.expected()).toBeUndefined();
    m.learn(100, 100);
    expect(m.expected()).toBe(100);
  });

  it('predicts what answers that stop on their own run, not their max_tokens', () => {
    const m = new OutputLengthModel();
    // Half stop at 100 tokens, half at 300; every request asked for up to 1,000.
    for (let i = 0; i < 10; i++) {
      m.learn(100, 100, 1000);
      m.learn(300, 300, 1000);
    }
    expect(m.expected(1000)).toBe(200);
    // Capped at 200: the long half counts 200.
    expect(m.expected(200)).toBe(150);
    // One that ran past 100 is one of the long ones: 300 - 150 still to come, not 50.
    expect(m.remaining(150, 1000)).toBe(150);
    expect(m.remaining(50, 1000)).toBe(150);
  });

  it('keeps max_tokens - streamed where every answer ran to its cap (the time estimate as before)', () => {
    const m = new OutputLengthModel();
    for (let i = 0; i < 20; i++) m.learn(16 + i * 10, 16 + i * 10, 16 + i * 10);
    expect(m.remaining(40, 200)).toBe(160);
    expect(m.expected(77)).toBe(77);
  });

  it('takes a capped answer as running at least its cap (Kaplan-Meier), not as stopping there', () => {
    const m = new OutputLengthModel();
    // Caps at 50 hide how long the answers run; the uncapped ones show 200.
    for (let i = 0; i < 10; i++) {
      m.learn(50, 50, 50);
      m.learn(200, 200, 1000);
    }
    expect(m.expected(1000)).toBe(200);
    // A mean of the lengths seen would say 125.
  });

  it('reads a page-wide measurement as its middle, and one that may have reached its cap as capped', () => {
    const m = new OutputLengthModel();
    for (let i = 0; i < 8; i++) m.learn(33, 48);
    expect(m.expected()).toBe(41);
    const capped = new OutputLengthModel();
    for (let i = 0; i < 8; i++) capped.learn(33, 40, 40);
    expect(capped.expected(40)).toBe(40);
    expect(capped.expected(100)).toBe(100);
  });

  it('follows the latest 256 answers', () => {
    const m = new OutputLengthModel();
    for (let i = 0; i < 256; i++) m.learn(500, 500);
    for (let i = 0; i < 256; i++) m.learn(20, 20);
    expect(m.expected()).toBe(20);
    expect(m.observations).toBe(256);
  });
});
