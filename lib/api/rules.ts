import type { z } from 'zod';

/**
 * A cross-field rule written once and enforced twice: as CEL in the CRD (so the
 * API server rejects a bad manifest at `kubectl apply`) and as a zod refinement
 * (so the operator and gateway reject the same input with the same words).
 * `check` must be the exact meaning of `cel`; the integration suite proves the
 * pair agree by applying every invalid manifest to a real API server.
 */
export interface Rule<T> {
  readonly cel: string;
  readonly message: string;
  /** Relative JSONPath of the field the error points at, e.g. `.runtime.image`. */
  readonly fieldPath?: string;
  readonly check: (self: T) => boolean;
}

/** A rule that compares an update with the stored object (CEL `oldSelf`). */
export interface TransitionRule<T> {
  readonly cel: string;
  readonly message: string;
  readonly fieldPath?: string;
  readonly check: (self: T, oldSelf: T) => boolean;
}

export interface CelValidation {
  rule: string;
  message: string;
  fieldPath?: string;
}

export const VALIDATIONS_KEY = 'x-kubernetes-validations';

export function toCel(rule: { cel: string; message: string; fieldPath?: string | undefined }): CelValidation {
  return { rule: rule.cel, message: rule.message, ...(rule.fieldPath ? { fieldPath: rule.fieldPath } : {}) };
}

function pathOf(fieldPath: string | undefined): string[] {
  return fieldPath ? fieldPath.split('.').filter((p) => p.length > 0) : [];
}

/**
 * Attaches rules to an object schema: CEL for the CRD through metadata, the same
 * predicate for zod through a refinement. Transition rules go to the CRD only;
 * `checkTransition` applies them in code.
 */
export function withRules<S extends z.ZodType>(
  schema: S,
  rules: readonly Rule<z.output<S>>[],
  transitions: readonly TransitionRule<z.output<S>>[] = [],
): S {
  const cel = [...rules, ...transitions].map(toCel);
  const refined = schema.superRefine((value, ctx) => {
    for (const rule of rules) {
      if (!rule.check(value))
        ctx.addIssue({ code: 'custom', message: rule.message, path: pathOf(rule.fieldPath) });
    }
  });
  return refined.meta({ [VALIDATIONS_KEY]: cel });
}

export interface RuleViolation {
  readonly message: string;
  readonly path: string;
}

export function checkTransition<T>(
  transitions: readonly TransitionRule<T>[],
  next: T,
  previous: T,
): RuleViolation[] {
  return transitions
    .filter((t) => !t.check(next, previous))
    .map((t) => ({ message: t.message, path: t.fieldPath ?? '' }));
}
