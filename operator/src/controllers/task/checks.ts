// Output checks before success: regex, JSON schema (json-schema.ts subset), length.
// The first failing check, in spec order, is the answer: which one and why.
//
// Regexes run in-process under RE2 (re2-pattern.ts): matching takes time
// linear in the output, so no pattern a namespace user writes can stall the
// operator. A pattern RE2 cannot compile fails the Task before it generates
// (findInvalidCheck, phase.ts: reason InvalidCheck); it never falls back to a
// backtracking engine.
import type { TaskSpec } from '#api/task.ts';
import { checkSchemaSupported, validateJson } from './json-schema.ts';
import { compileRe2Pattern } from './re2-pattern.ts';
import { err, ok, type Result } from './attempt/types.ts';

export type OutputCheck = NonNullable<TaskSpec['checks']>[number];

export interface CheckFailure {
  name: string;
  type: OutputCheck['type'];
  message: string;
}

function runOne(output: string, check: OutputCheck): string | undefined {
  switch (check.type) {
    case 'Regex': {
      const re = compileRe2Pattern(check.pattern ?? '');
      if (!re.ok) return `invalid pattern: ${re.error}`;
      return re.value.test(output) ? undefined : `output does not match /${check.pattern ?? ''}/`;
    }
    case 'Length': {
      const n = [...output].length;
      if (check.min !== undefined && n < check.min)
        return `output has ${n} characters, fewer than ${check.min}`;
      if (check.max !== undefined && n > check.max)
        return `output has ${n} characters, more than ${check.max}`;
      return undefined;
    }
    case 'JSONSchema': {
      let schema: unknown;
      try {
        schema = JSON.parse(check.schema ?? '');
      } catch {
        return 'schema is not valid JSON';
      }
      const supported = checkSchemaSupported(schema);
      if (!supported.ok) return `schema not supported at ${supported.error.path}: ${supported.error.message}`;
      let value: unknown;
      try {
        value = JSON.parse(output);
      } catch {
        return 'output is not JSON';
      }
      const r = validateJson(value, schema);
      return r.ok ? undefined : `${r.error.path}: ${r.error.message}`;
    }
  }
}

/**
 * The first check the operator cannot run, and why: a Regex RE2 cannot compile. Found before the
 * Task generates, so a Task that could never pass does not spend tokens first. The API server
 * cannot compile RE2 (CEL has no such function), and zod repeats only what it checks.
 */
export function findInvalidCheck(checks: readonly OutputCheck[] | undefined): CheckFailure | undefined {
  for (const check of checks ?? []) {
    if (check.type !== 'Regex') continue;
    const re = compileRe2Pattern(check.pattern ?? '');
    if (!re.ok) return { name: check.name, type: check.type, message: re.error };
  }
  return undefined;
}

export function runChecks(
  output: string,
  checks: readonly OutputCheck[] | undefined,
): Result<void, CheckFailure> {
  for (const check of checks ?? []) {
    const message = runOne(output, check);
    if (message !== undefined) return err({ name: check.name, type: check.type, message });
  }
  return ok(undefined);
}
