// Namespaces on a command line, for the operator and the gateway alike: a
// name is a DNS label (RFC 1123), so what the API server would refuse is
// refused at start, with the name and the rule.
import { z } from 'zod';

export const NamespaceName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, {
    error: (iss) =>
      `${JSON.stringify(iss.input)} is not a namespace name (lower-case letters, digits and '-')`,
  })
  .max(63, {
    error: (iss) => `${JSON.stringify(iss.input)} is longer than a namespace name (63 characters)`,
  });

/**
 * `--namespace a,b` and `--namespace a --namespace b` mean the same; empty items
 * (`--namespace=`) add nothing, and a name given twice counts once. None: all namespaces.
 */
export const NamespaceListFlag = z
  .array(z.string())
  .default([])
  .transform((list) => [
    ...new Set(
      list
        .flatMap((n) => n.split(','))
        .map((n) => n.trim())
        .filter((n) => n !== ''),
    ),
  ])
  .pipe(z.array(NamespaceName));
