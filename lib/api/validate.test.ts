import { describe, expect, it } from 'vitest';
import { buildInvalid, INVALID_CASES, UPDATE_CASES } from '../../test/support/invalid-manifests.ts';
import { loadSample, loadSamples } from '../../test/support/samples.ts';
import { validateResource, validateUpdate, type CacherouteResource } from './validate.ts';

describe('validateResource', () => {
  it.each(loadSamples().map((s) => [`${s.file} ${s.doc.kind}/${s.doc.metadata.name}`, s.doc] as const))(
    'accepts the sample %s',
    (_name, doc) => {
      const result = validateResource(doc);
      expect(result.ok ? [] : result.issues).toEqual([]);
    },
  );

  it('holds at least 25 invalid cases', () => {
    expect(INVALID_CASES.length).toBeGreaterThanOrEqual(25);
  });

  it.each(INVALID_CASES.map((c) => [c.name, c] as const))('rejects %s', (_name, c) => {
    const result = validateResource(buildInvalid(c));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    // CEL-backed rules: zod must use the API server's exact words; OpenAPI bounds: its own.
    const words = c.structural ? c.zodMessage : c.expect;
    if (words === undefined) return;
    expect(result.issues.map((i) => i.message)).toContainEqual(expect.stringContaining(words));
  });

  it('refuses an object of another group with a message naming the expected kinds', () => {
    const result = validateResource({ apiVersion: 'apps/v1', kind: 'Deployment' });
    expect(result).toMatchObject({ ok: false, issues: [{ path: 'kind' }] });
  });

  it('applies schema defaults like the API server does', () => {
    const result = validateResource(loadSample('cachepolicy.yaml'));
    if (!result.ok || result.value.kind !== 'CachePolicy') throw new Error('sample must parse');
    expect(result.value.spec.routing.prefixHash).toEqual({
      prefixBlocks: 16,
      blockTokens: 64,
      loadFactor: 1.25,
    });
    expect(result.value.spec.targetRefs[0]?.group).toBe('cacheroute.dev');
  });

  it('points a rule violation at the field it names', () => {
    const result = validateResource(
      buildInvalid(INVALID_CASES.find((c) => c.name === 'bootstrap port below range')!),
    );
    expect(result.ok ? [] : result.issues.map((i) => i.path)).toContain('spec.disaggregation.bootstrapPort');
  });
});

describe('validateUpdate', () => {
  function parse(doc: unknown): CacherouteResource {
    const r = validateResource(doc);
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    return r.value;
  }

  it.each(UPDATE_CASES.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const previous = { ...loadSample(c.sample), ...(c.status ? { status: c.status } : {}) };
    const next = structuredClone(previous);
    c.mutate(next);
    const violations = validateUpdate(parse(next), parse(previous));
    if (c.expect === null) expect(violations).toEqual([]);
    else expect(violations.map((v) => v.message)).toContainEqual(expect.stringContaining(c.expect));
  });
});
