// The Node flags the gateway image runs with, read from gateway/Containerfile's ENTRYPOINT, so
// `make run`, the e2e image tests and the bench start the gateway (and the picker) as the image
// does: one list, not a copy a place. Pure but for reading the file.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The flags between `node` and the entry script in an exec-form `ENTRYPOINT [...]` line. */
export function parseEntrypointNodeFlags(containerfile: string): string[] {
  const line = containerfile.split('\n').find((l) => l.startsWith('ENTRYPOINT '));
  if (line === undefined) throw new Error('no ENTRYPOINT line in the gateway Containerfile');
  const argv: unknown = JSON.parse(line.slice('ENTRYPOINT '.length));
  if (!Array.isArray(argv) || !argv.every((a): a is string => typeof a === 'string'))
    throw new Error(`the gateway ENTRYPOINT is not an exec-form list of strings: ${line}`);
  const script = argv.findIndex((a) => a.endsWith('.ts'));
  if (script < 1) throw new Error(`the gateway ENTRYPOINT names no script after node: ${line}`);
  return argv.slice(1, script);
}

/** gateway/Containerfile's Node flags for the gateway process. */
export function gatewayNodeFlags(repo: string = REPO): string[] {
  return parseEntrypointNodeFlags(readFileSync(path.join(repo, 'gateway/Containerfile'), 'utf8'));
}

// `node hack/images/gateway-node-flags.ts` prints them for the Makefile.
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  process.stdout.write(`${gatewayNodeFlags().join(' ')}\n`);
