// Output checks before success: regex, JSON schema (json-schema.ts subset), length.
// The first failing check, in spec order, is the answer: which one and why.
//
// Regexes run in-process with the `u` flag on an output bounded by the output
// cap; JavaScript regexes have no time limit, so a pathological pattern can be
// slow (the Task author owns both the pattern and the cap).
import type { TaskSpec } from '#api/task.ts';
import { checkSchemaSupported, validateJson } from './json-schema.ts';
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
      let re: RegExp;
      try {
        re = new RegExp(check.pattern ?? '', 'u');
      } catch (e) {
        return `invalid pattern: ${(e as Error).message}`;
      }
      return re.test(output) ? undefined : `output does not match /${check.pattern ?? ''}/`;
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
