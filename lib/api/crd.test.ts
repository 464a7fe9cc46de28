import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { z } from 'zod';
import { REPO_ROOT } from '../../test/support/samples.ts';
import { buildCrd } from './crd.ts';
import { KINDS } from './kinds.ts';
import { toOpenApi, toStructural, type SchemaNode } from './openapi.ts';
import { Quantity } from './common.ts';

/** Visits every schema node under properties/items/additionalProperties. */
function walk(node: SchemaNode, path: string, visit: (n: SchemaNode, p: string) => void): void {
  visit(node, path);
  const props = node['properties'] as Record<string, SchemaNode> | undefined;
  for (const [k, v] of Object.entries(props ?? {})) walk(v, `${path}.${k}`, visit);
  if (node['items']) walk(node['items'] as SchemaNode, `${path}[]`, visit);
  const ap = node['additionalProperties'];
  if (ap && typeof ap === 'object') walk(ap as SchemaNode, `${path}{}`, visit);
}

describe.each(KINDS.map((k) => [k.kind, k] as const))('CRD %s', (_kind, def) => {
  const crd = buildCrd(def) as { spec: Record<string, unknown> };
  const version = (crd.spec['versions'] as SchemaNode[])[0]!;
  const schema = (version['schema'] as { openAPIV3Schema: SchemaNode }).openAPIV3Schema;

  it('is structural: every node has a type, never additionalProperties: false', () => {
    const problems: string[] = [];
    walk(schema, '', (n, p) => {
      const typed = n['type'] !== undefined || n['x-kubernetes-int-or-string'] === true;
      if (!typed) problems.push(`${p}: no type`);
      if (n['additionalProperties'] === false) problems.push(`${p}: additionalProperties false`);
      if ('$schema' in n || 'const' in n) problems.push(`${p}: JSON-schema-only keyword`);
    });
    expect(problems).toEqual([]);
  });

  it('describes every spec field, so kubectl explain helps', () => {
    const missing: string[] = [];
    walk((schema['properties'] as Record<string, SchemaNode>)['spec']!, 'spec', (n, p) => {
      const isObjectField = !p.endsWith('[]') && !p.endsWith('{}');
      if (isObjectField && p.split('.').length === 2 && n['description'] === undefined) missing.push(p);
    });
    expect(missing).toEqual([]);
  });

  it('has the status subresource, the category and a short name', () => {
    expect(version['subresources']).toHaveProperty('status');
    const names = crd.spec['names'] as { categories: string[]; shortNames: string[] };
    expect(names.categories).toEqual(['cacheroute']);
    expect(names.shortNames.length).toBeGreaterThan(0);
    expect(names.shortNames).not.toContain('deploy');
  });

  it('matches the committed file (run `make crds` after changing the schemas)', () => {
    const committed = parse(
      readFileSync(join(REPO_ROOT, 'crds', `${def.plural}.cacheroute.dev.yaml`), 'utf8'),
    ) as unknown;
    expect(committed).toEqual(JSON.parse(JSON.stringify(crd)));
  });
});

describe('the Deployment CRD', () => {
  it('exposes the scale subresource on spec.replicas for HPA and KEDA', () => {
    const def = KINDS.find((k) => k.kind === 'Deployment')!;
    expect(def.scale).toEqual({
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.selector',
    });
  });
});

describe('toStructural', () => {
  it('renders a quantity as int-or-string with its pattern', () => {
    const node = toOpenApi(z.object({ q: Quantity }));
    const q = (node['properties'] as Record<string, SchemaNode>)['q']!;
    expect(q['x-kubernetes-int-or-string']).toBe(true);
    expect(q['anyOf']).toEqual([{ type: 'integer' }, { type: 'string' }]);
    expect(typeof q['pattern']).toBe('string');
  });

  it("keeps zod's safe-integer bounds, so the API server refuses what zod refuses", () => {
    const node = toOpenApi(z.object({ a: z.number().int(), b: z.number().int().max(10) }));
    const props = node['properties'] as Record<string, SchemaNode>;
    expect(props['a']).toEqual({
      type: 'integer',
      minimum: -Number.MAX_SAFE_INTEGER,
      maximum: Number.MAX_SAFE_INTEGER,
    });
    expect(props['b']?.['maximum']).toBe(10);
  });

  it('turns const into a one-value enum and removes additionalProperties: false', () => {
    expect(
      toStructural({ type: 'object', additionalProperties: false, properties: { k: { const: 'x' } } }),
    ).toEqual({
      type: 'object',
      properties: { k: { enum: ['x'] } },
    });
  });

  it('keeps CEL rules from metadata', () => {
    const node = toOpenApi(
      z.object({}).meta({ 'x-kubernetes-validations': [{ rule: 'true', message: 'm' }] }),
    );
    expect(node['x-kubernetes-validations']).toEqual([{ rule: 'true', message: 'm' }]);
  });
});

describe('toStructural on field names', () => {
  it('keeps fields whose names are JSON-schema keywords', () => {
    const node = toOpenApi(z.object({ id: z.string(), const: z.string(), maximum: z.number() }));
    expect(Object.keys(node['properties'] as object)).toEqual(['id', 'const', 'maximum']);
  });
});
