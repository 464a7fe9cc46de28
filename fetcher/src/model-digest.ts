// `make model-digest DIR=<model dir> [ARGS=...]`: prints the `digest` and `tokenizerDigest`
// to pin in a Deployment's spec.model for the files a user has (ADR 0013). `--manifest
// model|tokenizer` prints that manifest instead: its sha256sum is the digest.
import { stat } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { manifestOfDirectory } from './files.ts';
import {
  digestOfManifest,
  isTokenizerFile,
  serializeManifest,
  TOKENIZER_FILE_NAMES,
  type Manifest,
} from './manifest.ts';

const USAGE =
  'usage: model-digest <model dir> [--tokenizer-dir <dir>] [--manifest model|tokenizer]\n' +
  '  --tokenizer-dir  the tokenizer files, when spec.model.tokenizerPath is not the model (default: the model dir)\n' +
  '  --manifest       print that manifest (the bytes whose sha256 is the digest) instead of the digests\n';

class UsageError extends Error {}

async function requireDirectory(dir: string): Promise<void> {
  const info = await stat(dir).catch(() => undefined);
  if (!info) throw new Error(`${dir}: no such directory`);
  if (!info.isDirectory()) throw new Error(`${dir}: not a directory`);
}

async function modelManifest(dir: string): Promise<Manifest> {
  const m = await manifestOfDirectory(dir);
  if (m.files.length === 0)
    throw new Error(
      `${dir}: no model files (hidden files and directories, like .git/ and .cache/, do not count)`,
    );
  return m;
}

async function tokenizerManifest(dir: string): Promise<Manifest> {
  const m = await manifestOfDirectory(dir, { select: isTokenizerFile });
  if (m.files.length === 0)
    throw new Error(
      `${dir}: no tokenizer files (looked for ${TOKENIZER_FILE_NAMES.join(', ')}, *.tiktoken, tokenization_*.py); ` +
        'if the tokenizer is in another directory, pass --tokenizer-dir',
    );
  return m;
}

async function run(argv: string[]): Promise<string> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { 'tokenizer-dir': { type: 'string' }, manifest: { type: 'string' } },
    });
  } catch (e) {
    throw new UsageError((e as Error).message, { cause: e });
  }
  const [modelDir, ...extra] = parsed.positionals;
  if (!modelDir || extra.length > 0) throw new UsageError('give exactly one model directory');
  const show = parsed.values.manifest;
  if (show !== undefined && show !== 'model' && show !== 'tokenizer')
    throw new UsageError(`--manifest takes model or tokenizer, not ${JSON.stringify(show)}`);
  const tokenizerDir = parsed.values['tokenizer-dir'] ?? modelDir;
  await requireDirectory(modelDir);
  await requireDirectory(tokenizerDir);
  if (show === 'model') return serializeManifest(await modelManifest(modelDir));
  if (show === 'tokenizer') return serializeManifest(await tokenizerManifest(tokenizerDir));
  // Both before printing either: a half answer would be pasted as a whole one.
  const model = await modelManifest(modelDir);
  const tokenizer = await tokenizerManifest(tokenizerDir);
  return `digest: ${digestOfManifest(model)}\ntokenizerDigest: ${digestOfManifest(tokenizer)}\n`;
}

try {
  process.stdout.write(await run(process.argv.slice(2)));
} catch (e) {
  const usage = e instanceof UsageError;
  process.stderr.write(`model-digest: ${(e as Error).message}\n${usage ? USAGE : ''}`);
  process.exitCode = usage ? 2 : 1;
}
