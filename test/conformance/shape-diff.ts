// Field-by-field comparison of a real SGLang answer with the simulator's: key
// sets, JSON types, null against a value, array shapes, and the values that
// must agree whatever the model says (object kinds, finish reasons, echoed
// names). Text, token ids, timings and request ids are compared by type only
// (ids also by format). Pure.

export interface Mismatch {
  readonly path: string;
  readonly real: string;
  readonly sim: string;
}

/** Keys whose values must be equal on both sides (not text, ids or timings). */
const VALUE_KEYS = new Set([
  'object',
  'model',
  'role',
  'owned_by',
  'root',
  'parent',
  'finish_reason',
  'type',
  'is_generation',
  'weight_version',
  'status',
  'version',
  'disaggregation_mode',
  'mode',
  'model_path',
  'tokenizer_path',
  'served_model_name',
  'model_type',
  'architectures',
  'max_total_num_tokens',
  'dp_size',
  'tp_size',
  'page_size',
  'enable_cache_report',
  'enable_metrics',
  'enable_hierarchical_cache',
]);

type JsonType = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object';

export function jsonType(v: unknown): JsonType {
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'boolean';
  if (typeof v === 'number') return 'number';
  if (typeof v === 'string') return 'string';
  return 'object';
}

/** A request id's format: SGLang's are uuid4 hex, 32 characters. */
export function idFormat(v: unknown): string {
  if (typeof v !== 'string') return jsonType(v);
  return /^[0-9a-f]{32}$/.test(v) ? 'hex32' : `other (${v.slice(0, 16)})`;
}

function show(v: unknown): string {
  if (v === undefined) return 'absent';
  const t = jsonType(v);
  if (t === 'object' || t === 'array') return t;
  return `${t} ${JSON.stringify(v)}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return jsonType(v) === 'object';
}

export interface DiffOptions {
  /** Paths (as reported) whose values are not compared even under VALUE_KEYS. */
  readonly valuesAside?: readonly string[];
}

/** Mismatches between a real answer and the simulator's, by path. */
export function diffJson(real: unknown, sim: unknown, path = '', opts: DiffOptions = {}): Mismatch[] {
  const out: Mismatch[] = [];
  walk(real, sim, path, out, opts);
  return out;
}

function lastKey(path: string): string {
  const m = /([A-Za-z0-9_]+)(\[\])?$/.exec(path);
  return m?.[1] ?? '';
}

function walk(real: unknown, sim: unknown, path: string, out: Mismatch[], opts: DiffOptions): void {
  const key = lastKey(path);
  if (key === 'id' && !path.endsWith('data[].id')) {
    const [a, b] = [idFormat(real), idFormat(sim)];
    if (a !== b) out.push({ path, real: a, sim: b });
    return;
  }
  const [ta, tb] = [jsonType(real), jsonType(sim)];
  if (ta !== tb) {
    out.push({ path, real: show(real), sim: show(sim) });
    return;
  }
  if (isRecord(real) && isRecord(sim)) {
    for (const k of new Set([...Object.keys(real), ...Object.keys(sim)])) {
      const p = path === '' ? k : `${path}.${k}`;
      if (!(k in real)) out.push({ path: p, real: 'absent', sim: show(sim[k]) });
      else if (!(k in sim)) out.push({ path: p, real: show(real[k]), sim: 'absent' });
      else walk(real[k], sim[k], p, out, opts);
    }
    return;
  }
  if (Array.isArray(real) && Array.isArray(sim)) {
    walkArray(real, sim, path, out, opts);
    return;
  }
  const compareValue = VALUE_KEYS.has(key) && !(opts.valuesAside ?? []).includes(path);
  if (compareValue && JSON.stringify(real) !== JSON.stringify(sim)) {
    out.push({ path, real: show(real), sim: show(sim) });
  }
}

function walkArray(real: unknown[], sim: unknown[], path: string, out: Mismatch[], opts: DiffOptions): void {
  const p = `${path}[]`;
  const structured = [...real, ...sim].some((v) => jsonType(v) === 'object' || jsonType(v) === 'array');
  if (!structured) {
    // Token ids, texts, numbers: element types only (lengths follow the model's output).
    const [a, b] = [typeSet(real), typeSet(sim)];
    if (real.length > 0 && sim.length > 0 && a !== b) out.push({ path: p, real: a, sim: b });
    if (VALUE_KEYS.has(lastKey(path)) && JSON.stringify(real) !== JSON.stringify(sim)) {
      out.push({ path, real: JSON.stringify(real), sim: JSON.stringify(sim) });
    }
    return;
  }
  if (real.length !== sim.length) {
    out.push({ path, real: `${real.length} items`, sim: `${sim.length} items` });
  }
  for (let i = 0; i < Math.min(real.length, sim.length); i++) walk(real[i], sim[i], p, out, opts);
}

function typeSet(values: readonly unknown[]): string {
  return [...new Set(values.map(jsonType))].sort().join('|');
}

// ---- Prometheus text ---------------------------------------------------------

export interface MetricFamily {
  readonly type: string;
  /** Label names over all samples, `le` and `quantile` aside. */
  readonly labels: Set<string>;
  /** Every value seen per label name. */
  readonly values: Map<string, Set<string>>;
}

const SUFFIXES = ['_bucket', '_sum', '_count', '_total', '_created', '_gsum', '_gcount'];

/** The families of a Prometheus text exposition, with their label names and values. */
export function parseMetricFamilies(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>();
  const ensure = (name: string, type: string): MetricFamily => {
    let f = families.get(name);
    if (!f) {
      f = { type, labels: new Set(), values: new Map() };
      families.set(name, f);
    }
    return f;
  };
  for (const line of text.split('\n')) {
    const typed = /^# TYPE (\S+) (\S+)/.exec(line);
    if (typed) {
      ensure(typed[1] ?? '', typed[2] ?? '');
      continue;
    }
    if (line.startsWith('#') || line.trim() === '') continue;
    const m = /^([^{\s]+)(?:\{(.*)\})?\s/.exec(line);
    if (!m) continue;
    const sample = m[1] ?? '';
    const base = familyOf(sample, families);
    const f = ensure(base, families.get(base)?.type ?? 'untyped');
    for (const [, k, v] of (m[2] ?? '').matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      const name = k ?? '';
      if (name !== 'le' && name !== 'quantile') f.labels.add(name);
      const seen = f.values.get(name) ?? new Set<string>();
      seen.add(v ?? '');
      f.values.set(name, seen);
    }
  }
  return families;
}

function familyOf(sample: string, families: ReadonlyMap<string, MetricFamily>): string {
  if (families.has(sample)) return sample;
  for (const s of SUFFIXES) {
    if (sample.endsWith(s) && families.has(sample.slice(0, -s.length))) return sample.slice(0, -s.length);
  }
  return sample;
}

export interface MetricDiffOptions {
  /** Families one side may have and the other not (not simulated), by name. */
  readonly notSimulated?: ReadonlySet<string>;
  /** Label names whose values must agree. */
  readonly valueLabels?: readonly string[];
}

/** Family names, types, label names (and listed label values) that differ. */
export function diffMetricFamilies(
  real: ReadonlyMap<string, MetricFamily>,
  sim: ReadonlyMap<string, MetricFamily>,
  prefix: string,
  opts: MetricDiffOptions = {},
): Mismatch[] {
  const out: Mismatch[] = [];
  const aside = opts.notSimulated ?? new Set<string>();
  const valueLabels = opts.valueLabels ?? [];
  for (const name of [...new Set([...real.keys(), ...sim.keys()])].sort()) {
    const path = `${prefix}${name}`;
    const a = real.get(name);
    const b = sim.get(name);
    if (aside.has(name)) continue;
    if (!a || !b) {
      out.push({ path, real: a ? a.type : 'absent', sim: b ? b.type : 'absent' });
      continue;
    }
    if (a.type !== b.type) out.push({ path: `${path} type`, real: a.type, sim: b.type });
    const [la, lb] = [[...a.labels].sort().join(','), [...b.labels].sort().join(',')];
    if (la !== lb) out.push({ path: `${path} labels`, real: la, sim: lb });
    for (const label of valueLabels) {
      const [va, vb] = [sortedValues(a, label), sortedValues(b, label)];
      if (va !== vb) out.push({ path: `${path}{${label}}`, real: va, sim: vb });
    }
  }
  return out;
}

function sortedValues(f: MetricFamily, label: string): string {
  return [...(f.values.get(label) ?? [])]
    .sort((x, y) => Number(x) - Number(y) || x.localeCompare(y))
    .join(',');
}
