import { createHash } from 'node:crypto';
import type { DeploymentSpec } from '#api';
import { buildArgv } from './args.ts';
import type { RoleEngine } from './roles.ts';

export const FINGERPRINT_LENGTH = 16;

/** The digest after `@sha256:`, or the whole reference when it has none. */
export function computeImageDigest(image: string): string {
  const at = image.lastIndexOf('@');
  return at >= 0 ? image.slice(at + 1) : image;
}

/**
 * What the identity is made of: weights, tokenizer, image, SGLang version and
 * each engine's rendered serving arguments and environment. Replica counts and
 * scheduling are not identity: scaling never changes the fingerprint.
 */
export function computeFingerprint(spec: DeploymentSpec, engines: readonly RoleEngine[]): string {
  const material = {
    model: spec.model.digest,
    tokenizer: spec.model.tokenizerDigest,
    image: computeImageDigest(spec.runtime.image),
    version: spec.runtime.version,
    env: (spec.runtime.env ?? []).map((e) => [e.name, e.value]),
    engines: engines.map((e) => ({ role: e.role, argv: buildArgv(spec, e) })),
  };
  // A fixed key order makes the JSON canonical: every value above is built in a fixed order.
  return createHash('sha256').update(JSON.stringify(material)).digest('hex').slice(0, FINGERPRINT_LENGTH);
}
