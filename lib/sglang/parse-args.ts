// A launch command line parsed as SGLang's argparse parser parses it, over the
// pinned SGLang's whole flag table (catalogue.ts): `--flag value`,
// `--flag=value`, unique prefixes of long options, store_true flags,
// `--x/--no-x` pairs, multi-value flags, the last occurrence winning, and
// argparse's error words and order (the first bad value stops the parse,
// then a missing required flag, then leftovers). Pure.
import { findFlag, listOptionStrings, SGLANG_FLAGS, type CatalogueFlag } from './catalogue.ts';

export type SglangScalar = string | number | boolean | null;
export type SglangValue = SglangScalar | readonly SglangScalar[];
/** Parsed arguments keyed by ServerArgs field (argparse dest); every flag present with its default. */
export type ParsedArgValues = Readonly<Record<string, SglangValue>>;

export interface SglangArgIssue {
  readonly code:
    | 'unrecognized_arguments'
    | 'ambiguous_option'
    | 'invalid_choice'
    | 'invalid_value'
    | 'expected_argument'
    | 'ignored_explicit_argument'
    | 'required'
    | 'incompatible';
  readonly path: readonly string[];
  /** argparse's (or SGLang's) own words, e.g. "unrecognized arguments: --foo". */
  readonly message: string;
}

export type Result<T, E> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: E };

export interface ParsedSglangArgv {
  readonly values: ParsedArgValues;
  /** Dests given on the command line (so a caller can tell an explicit default from an omitted flag). */
  readonly explicit: ReadonlySet<string>;
}

// SGLang's only required flag (argparse lists it with its alias).
const REQUIRED = ['model_path'];

function actionName(flag: CatalogueFlag): string {
  return [
    flag.name,
    ...flag.aliases.filter((a) => !a.startsWith('--no-') || flag.kind !== 'boolean_optional'),
  ]
    .filter((o, i, all) => all.indexOf(o) === i)
    .join('/');
}

function quote(v: SglangScalar): string {
  return typeof v === 'string' ? `'${v}'` : String(v);
}

const HUMAN_INT = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)$/;
const HUMAN_MULTIPLIER: Readonly<Record<string, number>> = {
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
};

function isPythonInt(raw: string): boolean {
  return /^\s*[-+]?\d+(_\d+)*\s*$/.test(raw);
}

/** SGLang's human_readable_int (utils/common.py): 128k, 1.5M, 2Ki; decimals only with SI suffixes. */
function parseHumanInt(raw: string): number | undefined {
  const v = raw.trim();
  const m = HUMAN_INT.exec(v);
  if (m) {
    const [, number = '', suffix = ''] = m;
    if (suffix.endsWith('i') && number.includes('.')) return undefined;
    return Math.trunc(Number(number) * (HUMAN_MULTIPLIER[suffix] ?? 1));
  }
  return isPythonInt(v) ? Number.parseInt(v.replaceAll('_', ''), 10) : undefined;
}

/** One raw string through the flag's converter, as argparse applies `type=`. */
function convert(flag: CatalogueFlag, raw: string): Result<SglangScalar, string> {
  const bad = (kind: string): Result<SglangScalar, string> => ({
    ok: false,
    error: `argument ${actionName(flag)}: invalid ${kind} value: '${raw}'`,
  });
  switch (flag.type) {
    case 'int':
      return isPythonInt(raw)
        ? { ok: true, value: Number.parseInt(raw.replaceAll('_', ''), 10) }
        : bad('int');
    case 'float': {
      const n = Number(raw.trim());
      const special = /^\s*[-+]?(inf|infinity|nan)\s*$/i.test(raw);
      return raw.trim() !== '' && (!Number.isNaN(n) || special) ? { ok: true, value: n } : bad('float');
    }
    case 'human_readable_int': {
      const n = parseHumanInt(raw);
      return n === undefined ? bad('human_readable_int') : { ok: true, value: n };
    }
    case 'json':
    case 'json_list_type':
      try {
        JSON.parse(raw);
        return { ok: true, value: raw };
      } catch {
        return bad(flag.type === 'json' ? 'loads' : 'json_list_type');
      }
    case 'nullable_str':
      return { ok: true, value: raw === '' || raw === 'None' ? null : raw };
    default:
      // str and SGLang's own string parsers: the string itself (choices are checked next).
      return { ok: true, value: raw };
  }
}

function checkChoice(flag: CatalogueFlag, value: SglangScalar): string | undefined {
  if (!flag.choices || value === null) return undefined;
  if (flag.choices.some((c) => c === value || String(c) === String(value))) return undefined;
  const list = flag.choices.map((c) => quote(c)).join(', ');
  return `argument ${actionName(flag)}: invalid choice: ${quote(value)} (choose from ${list})`;
}

/** A token argparse would take as an option rather than a value (a negative number is a value). */
function looksLikeOption(token: string): boolean {
  return token.startsWith('-') && token !== '-' && !/^-\d+$|^-\d*\.\d+$/.test(token);
}

type Resolved =
  | { readonly kind: 'flag'; readonly flag: CatalogueFlag; readonly option: string }
  | { readonly kind: 'unknown' }
  | { readonly kind: 'ambiguous'; readonly message: string };

/** Exact option, else a unique prefix of one (argparse's allow_abbrev), as argparse resolves it. */
function resolveOption(option: string): Resolved {
  const exact = findFlag(option);
  if (exact) return { kind: 'flag', flag: exact, option };
  if (!option.startsWith('--') || option.length < 3) return { kind: 'unknown' };
  const matches = listOptionStrings().filter((o) => o.startsWith(option));
  const first = matches[0];
  if (matches.length === 1 && first !== undefined) {
    const flag = findFlag(first);
    if (flag) return { kind: 'flag', flag, option: first };
  }
  if (matches.length > 1) {
    return { kind: 'ambiguous', message: `ambiguous option: ${option} could match ${matches.join(', ')}` };
  }
  return { kind: 'unknown' };
}

interface Taken {
  readonly value: SglangValue;
  readonly consumed: number;
}

/** The raw strings a flag with a value takes: the inline `=value`, else the tokens its nargs allows. */
function collectRaw(
  nargs: CatalogueFlag['nargs'],
  inline: string | undefined,
  rest: readonly string[],
): { raws: string[]; consumed: number } {
  if (inline !== undefined) return { raws: [inline], consumed: 0 };
  const following: string[] = [];
  for (const token of rest) {
    if (looksLikeOption(token)) break;
    following.push(token);
  }
  const raws = nargs === '+' || nargs === '*' ? following : following.slice(0, 1);
  return { raws, consumed: raws.length };
}

/** The values a flag takes from `rest` (the tokens after it), by its nargs. */
function takeValues(
  flag: CatalogueFlag,
  option: string,
  inline: string | undefined,
  rest: readonly string[],
): Result<Taken, string> {
  if (flag.nargs === 0) {
    if (inline !== undefined) {
      return { ok: false, error: `argument ${actionName(flag)}: ignored explicit argument '${inline}'` };
    }
    const value =
      flag.kind === 'boolean_optional' ? !option.startsWith('--no-') : flag.kind !== 'store_false';
    return { ok: true, value: { value, consumed: 0 } };
  }
  const many = flag.nargs === '+' || flag.nargs === '*';
  const { raws, consumed } = collectRaw(flag.nargs, inline, rest);
  if (raws.length === 0 && flag.nargs !== '*' && flag.nargs !== '?') {
    const what = flag.nargs === '+' ? 'expected at least one argument' : 'expected one argument';
    return { ok: false, error: `argument ${actionName(flag)}: ${what}` };
  }
  const values: SglangScalar[] = [];
  for (const raw of raws) {
    const converted = convert(flag, raw);
    if (!converted.ok) return converted;
    const refused = checkChoice(flag, converted.value);
    if (refused) return { ok: false, error: refused };
    values.push(converted.value);
  }
  // A store_const-like deprecated flag stores True for its one accepted value.
  const single = flag.kind === 'custom:DeprecatedStoreConstAction' ? true : (values[0] ?? null);
  return { ok: true, value: { value: many ? values : single, consumed } };
}

function defaults(): Record<string, SglangValue> {
  const out: Record<string, SglangValue> = {};
  for (const flag of SGLANG_FLAGS) if (!(flag.dest in out)) out[flag.dest] = flag.default;
  return out;
}

function fail(
  code: SglangArgIssue['code'],
  path: readonly string[],
  message: string,
): Result<never, SglangArgIssue> {
  return { ok: false, error: { code, path, message } };
}

/** Parse the arguments after `sglang.launch_server`; the error is argparse's first complaint. */
export function parseSglangArgv(argv: readonly string[]): Result<ParsedSglangArgv, SglangArgIssue> {
  const values = defaults();
  const explicit = new Set<string>();
  const unknown: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] ?? '';
    if (!looksLikeOption(token)) {
      unknown.push(token);
      continue;
    }
    const eq = token.startsWith('--') ? token.indexOf('=') : -1;
    const option = eq > 0 ? token.slice(0, eq) : token;
    const inline = eq > 0 ? token.slice(eq + 1) : undefined;
    const resolved = resolveOption(option);
    if (resolved.kind === 'ambiguous') return fail('ambiguous_option', [option], resolved.message);
    if (resolved.kind === 'unknown') {
      unknown.push(token);
      continue;
    }
    const { flag } = resolved;
    const taken = takeValues(flag, resolved.option, inline, argv.slice(i + 1));
    if (!taken.ok) {
      const code = taken.error.includes('invalid choice')
        ? 'invalid_choice'
        : taken.error.includes('ignored explicit')
          ? 'ignored_explicit_argument'
          : taken.error.includes('expected')
            ? 'expected_argument'
            : 'invalid_value';
      return fail(code, [flag.dest], taken.error);
    }
    values[flag.dest] = taken.value.value;
    explicit.add(flag.dest);
    i += taken.value.consumed;
  }
  const missing = REQUIRED.filter((dest) => !explicit.has(dest));
  if (missing.length > 0) {
    return fail('required', missing, 'the following arguments are required: --model-path/--model');
  }
  if (unknown.length > 0) {
    return fail('unrecognized_arguments', unknown, `unrecognized arguments: ${unknown.join(' ')}`);
  }
  return { ok: true, value: { values, explicit } };
}
