import { z } from 'zod';

/** A JSON schema node as the CRD's openAPIV3Schema holds it. */
export type SchemaNode = { [key: string]: unknown };

// Keys of JSON Schema that a structural CRD schema does not accept.
const DROPPED_KEYS = new Set(['$schema', 'id', '$id', 'examples']);

function isNode(v: unknown): v is SchemaNode {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Rewrites zod's OpenAPI 3.0 output into a structural schema the API server
 * accepts: no `additionalProperties: false`, int-or-string quantities in their
 * canonical `anyOf` form, `const` as a one-value enum. The safe-integer bounds zod
 * puts on every `.int()` stay: without them the API server takes 2^60 where zod
 * refuses it, and the object is accepted but never reconciled.
 */
export function toStructural(node: SchemaNode): SchemaNode {
  if (node['x-kubernetes-int-or-string'] === true) return intOrString(node);
  const out: SchemaNode = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROPPED_KEYS.has(key)) continue;
    if (
      key === 'additionalProperties' &&
      (value === false || node['x-kubernetes-preserve-unknown-fields'] === true)
    )
      continue;
    if (key === 'const') {
      out['enum'] = [value];
      continue;
    }
    out[key] = key === 'properties' && isNode(value) ? convertProperties(value) : convert(value);
  }
  if (out['x-kubernetes-preserve-unknown-fields'] === true && out['type'] === undefined)
    out['type'] = 'object';
  if (isNode(out['default'])) out['default'] = withNestedDefaults(out['default'], out);
  return out;
}

/**
 * The API server checks a default against the node's CEL rules as written,
 * without applying the defaults nested inside it; so `default: {}` on an object
 * whose rules read its fields fails. Spell the nested defaults out instead.
 */
function withNestedDefaults(value: SchemaNode, schema: SchemaNode): SchemaNode {
  const props = isNode(schema['properties']) ? schema['properties'] : {};
  const filled: SchemaNode = { ...value };
  for (const [name, prop] of Object.entries(props)) {
    if (!isNode(prop)) continue;
    const current = filled[name] ?? prop['default'];
    if (current === undefined) continue;
    filled[name] = isNode(current) ? withNestedDefaults(current, prop) : current;
  }
  return filled;
}

function convert(value: unknown): unknown {
  if (Array.isArray(value)) return (value as unknown[]).map((v) => (isNode(v) ? toStructural(v) : v));
  return isNode(value) ? toStructural(value) : value;
}

// A map of field names to schemas: its keys are names, never keywords, so a
// field called `id` or `const` must survive untouched.
function convertProperties(props: SchemaNode): SchemaNode {
  return Object.fromEntries(
    Object.entries(props).map(([name, v]) => [name, isNode(v) ? toStructural(v) : v]),
  );
}

function intOrString(node: SchemaNode): SchemaNode {
  const branches = Array.isArray(node['anyOf']) ? (node['anyOf'] as SchemaNode[]) : [];
  const str = branches.find((b) => b['type'] === 'string');
  const out: SchemaNode = {
    'x-kubernetes-int-or-string': true,
    anyOf: [{ type: 'integer' }, { type: 'string' }],
  };
  if (str?.['pattern'] !== undefined) out['pattern'] = str['pattern'];
  if (node['description'] !== undefined) out['description'] = node['description'];
  if (node['default'] !== undefined) out['default'] = node['default'];
  return out;
}

export function toOpenApi(schema: z.ZodType): SchemaNode {
  const raw = z.toJSONSchema(schema, {
    target: 'openapi-3.0',
    io: 'input',
    unrepresentable: 'throw',
  }) as SchemaNode;
  return toStructural(raw);
}
