import { describe, expect, it } from 'vitest';
import type { TaskResource } from '#api/resources.ts';
import {
  INLINE_RESULT_MAX_BYTES,
  buildResultConfigMapName,
  buildResultStorage,
  computeResultSha256,
  computeResultText,
} from './result.ts';

const task = {
  apiVersion: 'cacheroute.dev/v1alpha1',
  kind: 'Task',
  metadata: { name: 't1', namespace: 'ns', uid: 'uid-1' },
} as TaskResource;

describe('buildResultStorage', () => {
  it('keeps up to 16 KiB inline with its sha256', () => {
    const text = 'a'.repeat(INLINE_RESULT_MAX_BYTES);
    expect(buildResultStorage(task, text)).toEqual({
      ok: true,
      value: { result: { inline: text, sha256: computeResultSha256(text), bytes: INLINE_RESULT_MAX_BYTES } },
    });
  });

  it('counts bytes, not characters', () => {
    const text = 'é'.repeat(INLINE_RESULT_MAX_BYTES / 2 + 1);
    const r = buildResultStorage(task, text);
    expect(r.ok && r.value.configMap).toBeTruthy();
  });

  it('puts a larger result in a ConfigMap owned by the Task', () => {
    const text = 'b'.repeat(INLINE_RESULT_MAX_BYTES + 1);
    const r = buildResultStorage(task, text);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.result).toEqual({
      configMapRef: { name: 't1-result', key: 'result' },
      sha256: computeResultSha256(text),
      bytes: INLINE_RESULT_MAX_BYTES + 1,
    });
    expect(r.value.configMap).toMatchObject({
      metadata: {
        name: 't1-result',
        namespace: 'ns',
        ownerReferences: [
          { kind: 'Task', name: 't1', uid: 'uid-1', controller: true, blockOwnerDeletion: true },
        ],
      },
      data: { result: text },
    });
  });

  it('fails a result too large for a ConfigMap', () => {
    const r = buildResultStorage(task, 'c'.repeat(1024 * 1024));
    expect(!r.ok && r.error.code).toBe('ResultTooLarge');
  });

  it('bounds the ConfigMap name', () => {
    const long = 'x'.repeat(250);
    const name = buildResultConfigMapName(long);
    expect(name.length).toBeLessThanOrEqual(253);
    expect(name).not.toBe(buildResultConfigMapName('y'.repeat(250)));
  });
});

describe('computeResultText', () => {
  it('reads inline or the ConfigMap text and verifies the digest', () => {
    const sha256 = computeResultSha256('hi');
    expect(computeResultText({ inline: 'hi', sha256 })).toEqual({ ok: true, value: 'hi' });
    expect(computeResultText({ configMapRef: { name: 'c', key: 'result' }, sha256 }, 'hi')).toEqual({
      ok: true,
      value: 'hi',
    });
    expect(computeResultText({ configMapRef: { name: 'c', key: 'result' }, sha256 }, 'ho')).toMatchObject({
      ok: false,
      error: { code: 'ResultDigestMismatch' },
    });
    expect(computeResultText({ configMapRef: { name: 'c', key: 'result' }, sha256 })).toMatchObject({
      ok: false,
      error: { code: 'ResultMissing' },
    });
  });
});
