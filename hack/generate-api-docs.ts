// Writes docs/api.md, the API reference, from the zod schemas in lib/api,
// through the same CRD builder as `make crds`: every field, type, default, bound and
// cross-field rule here is what the API server enforces. With --check, writes nothing
// and fails when docs/api.md differs, so CI catches a schema change without `make docs`.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildCrd, CATEGORY, GROUP, KINDS, VERSION, type KindDefinition } from '#api';

type Node = { [key: string]: unknown };

interface Field {
  path: string;
  type: string;
  required: boolean;
  description: string;
  constraints: string[];
}

interface Rule {
  /** Below spec ('' = spec itself); null: the whole object. */
  path: string | null;
  message: string;
}

const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v);
const code = (s: string): string => `\`${s.replaceAll('`', "'")}\``;
// One table cell: no line breaks, no column separators.
const cell = (s: string): string => s.replace(/\s*\n\s*/g, ' ').replaceAll('|', '\\|');
// Prose from the schemas: angle brackets outside code spans are text, not HTML tags.
const prose = (s: string): string =>
  s
    .split(/(`[^`]*`)/)
    .map((part) => (part.startsWith('`') ? part : part.replaceAll('<', '&lt;').replaceAll('>', '&gt;')))
    .join('');

function typeOf(node: Node): string {
  if (node['x-kubernetes-int-or-string'] === true) return 'int-or-string';
  if (node['x-kubernetes-preserve-unknown-fields'] === true && !isNode(node['properties']))
    return 'object (free-form)';
  const type = typeof node['type'] === 'string' ? node['type'] : 'object';
  if (type === 'array') return `array of ${isNode(node['items']) ? typeOf(node['items']) : 'any'}`;
  if (type === 'object' && isNode(node['additionalProperties']))
    return `map of ${typeOf(node['additionalProperties'])}`;
  return type;
}

function constraintsOf(node: Node): string[] {
  const out: string[] = [];
  const num = (key: string): number | undefined => (typeof node[key] === 'number' ? node[key] : undefined);
  if (Array.isArray(node['enum'])) out.push(`one of ${node['enum'].map((v) => code(String(v))).join(', ')}`);
  if (node['default'] !== undefined) out.push(`default ${code(JSON.stringify(node['default']))}`);
  // Every integer carries the safe-integer bounds (zod's, kept in the CRD): not worth a line each.
  const bound = (key: string): number | undefined => {
    const v = num(key);
    return v !== undefined && Math.abs(v) === Number.MAX_SAFE_INTEGER ? undefined : v;
  };
  const [min, max] = [bound('minimum'), bound('maximum')];
  if (node['exclusiveMinimum'] === true || node['exclusiveMaximum'] === true)
    out.push(exclusiveRange(min, node['exclusiveMinimum'] === true, max, node['exclusiveMaximum'] === true));
  else if (min !== undefined || max !== undefined) out.push(range('value', min, max));
  const [minLen, maxLen] = [num('minLength'), num('maxLength')];
  if (minLen !== undefined || maxLen !== undefined) out.push(range('length', minLen, maxLen));
  const [minItems, maxItems] = [num('minItems'), num('maxItems')];
  if (minItems !== undefined || maxItems !== undefined) out.push(range('items', minItems, maxItems));
  if (typeof node['pattern'] === 'string') out.push(`pattern ${code(node['pattern'])}`);
  if (typeof node['format'] === 'string') out.push(`format ${node['format']}`);
  return out;
}

function range(what: string, min: number | undefined, max: number | undefined): string {
  if (min !== undefined && max !== undefined) return min === max ? `${what} ${min}` : `${what} ${min}–${max}`;
  return min !== undefined ? `${what} ≥ ${min}` : `${what} ≤ ${max ?? ''}`;
}

// OpenAPI 3.0 spells `> 0` as minimum 0 with exclusiveMinimum true (zod's .gt()).
function exclusiveRange(
  min: number | undefined,
  minExclusive: boolean,
  max: number | undefined,
  maxExclusive: boolean,
): string {
  const lower = min === undefined ? undefined : `${minExclusive ? '>' : '≥'} ${min}`;
  const upper = max === undefined ? undefined : `${maxExclusive ? '<' : '≤'} ${max}`;
  return `value ${[lower, upper].filter((s) => s !== undefined).join(' and ')}`;
}

/** Depth-first: each field, then its children (object properties, array items). */
function collect(node: Node, path: string, required: boolean, fields: Field[], rules: Rule[]): void {
  const validations = node['x-kubernetes-validations'];
  if (Array.isArray(validations))
    for (const v of validations)
      if (isNode(v) && typeof v['message'] === 'string') rules.push({ path, message: v['message'] });
  if (path !== '')
    fields.push({
      path,
      type: typeOf(node),
      required,
      description: typeof node['description'] === 'string' ? node['description'] : '',
      constraints: constraintsOf(node),
    });
  const props = node['properties'];
  if (isNode(props)) {
    const req = new Set(Array.isArray(node['required']) ? (node['required'] as string[]) : []);
    for (const [name, child] of Object.entries(props))
      if (isNode(child)) collect(child, path ? `${path}.${name}` : name, req.has(name), fields, rules);
  }
  if (isNode(node['items'])) collect(node['items'], `${path}[]`, false, fields, rules);
  if (isNode(node['additionalProperties']))
    collect(node['additionalProperties'], `${path}.*`, false, fields, rules);
}

function renderFields(title: string, fields: Field[]): string[] {
  const out = [`#### ${title}`, '', '| field | type | description |', '| --- | --- | --- |'];
  for (const f of fields) {
    const name = `${code(f.path)}${f.required ? ' **required**' : ''}`;
    const notes = f.constraints.length > 0 ? `<br>_${f.constraints.join('; ')}_` : '';
    out.push(`| ${cell(name)} | ${cell(f.type)} | ${cell(prose(f.description))}${cell(notes)} |`);
  }
  return [...out, ''];
}

const anchor = (kind: string): string => kind.toLowerCase();

function renderKind(def: KindDefinition): string[] {
  const crd = buildCrd(def) as {
    spec: { versions: { schema: { openAPIV3Schema: Node } }[] };
  };
  const root = crd.spec.versions[0]?.schema.openAPIV3Schema ?? {};
  const props = isNode(root['properties']) ? root['properties'] : {};
  const out: string[] = [`## ${def.kind}`, '', prose(def.description), ''];
  out.push(
    `\`${GROUP}/${VERSION}\`, kind \`${def.kind}\`, namespaced; plural \`${def.plural}\`, ` +
      `short name${def.shortNames.length > 1 ? 's' : ''} ${def.shortNames.map(code).join(', ')}, ` +
      `category \`${CATEGORY}\`; status subresource${def.scale ? ' and scale subresource (`kubectl scale`)' : ''}.`,
    '',
  );
  out.push(`### \`kubectl get ${def.shortNames[0] ?? def.plural}\` columns`, '');
  out.push('| column | type | JSONPath | shown |', '| --- | --- | --- | --- |');
  for (const c of def.printerColumns)
    out.push(
      `| ${c.name} | ${c.type} | ${cell(code(c.jsonPath))} | ${c.priority ? '`-o wide`' : 'always'}${c.description ? ` (${cell(c.description)})` : ''} |`,
    );
  out.push('');
  const rules: Rule[] = [];
  const rootRules = root['x-kubernetes-validations'];
  if (Array.isArray(rootRules))
    for (const v of rootRules)
      if (isNode(v) && typeof v['message'] === 'string') rules.push({ path: null, message: v['message'] });
  const sections: string[] = [];
  for (const part of ['spec', 'status'] as const) {
    const node = props[part];
    if (!isNode(node)) continue;
    const fields: Field[] = [];
    collect(node, '', false, fields, part === 'spec' ? rules : []);
    if (typeof node['description'] === 'string')
      sections.push(`### ${part}`, '', prose(node['description']), '');
    else sections.push(`### ${part}`, '');
    sections.push(
      ...renderFields(
        `${def.kind} ${part} fields`,
        fields.map((f) => ({ ...f, path: `${part}.${f.path}` })),
      ),
    );
  }
  if (rules.length > 0) {
    out.push(
      '### Cross-field rules',
      '',
      'CEL rules in the CRD (and the same refinements in zod, ADR 0002): the API server refuses a manifest that breaks one with this message.',
      '',
      '| where | message |',
      '| --- | --- |',
      ...rules.map(
        (r) =>
          `| ${code(r.path === null ? def.kind : `spec${r.path ? `.${r.path}` : ''}`)} | ${cell(prose(r.message))} |`,
      ),
      '',
    );
  }
  return [...out, ...sections];
}

const NUMBER_WORDS = ['No', 'One', 'Two', 'Three', 'Four', 'Five', 'Six', 'Seven', 'Eight'];

export function renderApiDocs(kinds: readonly KindDefinition[]): string {
  const lines = [
    `# API reference: \`${GROUP}/${VERSION}\``,
    '',
    '<!-- Generated by `make docs` (hack/generate-api-docs.ts) from the zod schemas in lib/api. Do not edit. -->',
    '',
    `${NUMBER_WORDS[kinds.length] ?? kinds.length} namespaced kinds; \`kubectl get ${CATEGORY}\` lists them all, and \`kubectl explain <kind>.spec\` shows the same descriptions.`,
    '',
    ...kinds.map(
      (k) => `- [${k.kind}](#${anchor(k.kind)}) (\`${k.shortNames.join('`, `')}\`): ${k.description}`,
    ),
    '',
  ];
  for (const k of kinds) lines.push(...renderKind(k));
  return `${lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trimEnd()}\n`;
}

if (import.meta.main) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const file = join(root, 'docs', 'api.md');
  const text = renderApiDocs(KINDS);
  const current = existsSync(file) ? readFileSync(file, 'utf8') : undefined;
  if (process.argv.includes('--check')) {
    if (current !== text) {
      console.error(`${relative(root, file)} differs from lib/api: run \`make docs\` and commit the result`);
      process.exit(1);
    }
  } else if (current !== text) {
    writeFileSync(file, text);
    console.log(`wrote ${relative(root, file)}`);
  }
}
