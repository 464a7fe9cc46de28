// `model-fetch`: fetches a hub model at a commit into a directory and verifies it against the
// pinned digests (ADR 0013); the fetch Job's command. Progress goes to stdout as JSON lines,
// the last one the result (`"phase":"done"` or `"phase":"failed"` with a `reason`); a
// failure is also said in words on stderr. `--result-file` also gets that last line alone
// (the fetch Job points it at the container's termination message, which the operator reads
// without exec or any API access of the Job's). Exit codes: 0 fetched and verified, 1 failed
// (the reason in the last line), 2 bad arguments, 3 the files are not the pinned ones
// (ModelDigestMismatch, UnexpectedFiles: another attempt would fetch the same).
// docs/operations.md#model-fetch.
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { fetchModel, type FetchOutcome } from '../model/fetch.ts';
import type { FetchProgress } from '../model/fetch-progress.ts';
import {
  checkFetchRequest,
  checkVerifyRequest,
  type FetchRequest,
  type VerifyRequest,
} from '../model/fetch-request.ts';
import type { ProxyConfig } from '../model/hub-client.ts';
import { serveFetchProgress, type ProgressServer } from '../model/progress-server.ts';
import { verifyStagedModel } from '../model/verify-staged.ts';
import { holdNodeLock } from '../model/node-lock.ts';

const USAGE = `usage: model-fetch --repo <org/name> --revision <commit id> --digest sha256:<hex> --tokenizer-digest sha256:<hex> --dest <dir> [options]
       model-fetch --verify-only --digest sha256:<hex> --tokenizer-digest sha256:<hex> --dest <dir> [--tokenizer-subpath <dir>] [--result-file <file>] [--progress-port <port>]
  --endpoint <url>           the hub or a mirror (default: $HF_ENDPOINT, else https://huggingface.co)
  --tokenizer-subpath <dir>  the repository directory the tokenizer digest is over (default: the top)
  --token-file <file>        the hub token, as a mounted Secret (default: $HF_TOKEN); never on the command line
  --proxy <url>              HTTP(S) proxy (default: $HTTPS_PROXY / $HTTP_PROXY, with $NO_PROXY)
  --concurrency <n>          files fetched at once (default 4)
  --result-file <file>       also write the last line there (the fetch Job: /dev/termination-log)
  --verify-only              fetch nothing: verify the files in --dest against the digests
  --lock-file <path>         hold this lock while fetching (a node cache shared by the pods of a node)
  --marker-dir <dir>         with --verify-only: keep a record of the verified files there, and trust it
                             next time for the same, unchanged files
  --progress-port <port>     serve the last progress line on GET /progress while fetching
  --progress-host <address>  the address it listens on (default: every address; the Job: its pod IP)
`;

const FLAGS: Record<keyof FetchRequest, string> = {
  endpoint: '--endpoint',
  repo: '--repo',
  revision: '--revision',
  digest: '--digest',
  tokenizerDigest: '--tokenizer-digest',
  tokenizerSubpath: '--tokenizer-subpath',
  dest: '--dest',
};

class UsageError extends Error {}

interface Invocation {
  readonly work:
    | {
        readonly mode: 'fetch';
        readonly request: FetchRequest;
        readonly token: string | undefined;
        readonly proxy: ProxyConfig | undefined;
        readonly concurrency: number;
        readonly lockFile: string | undefined;
      }
    | { readonly mode: 'verify'; readonly request: VerifyRequest; readonly markerDir: string | undefined };
  readonly resultFile: string | undefined;
  readonly progress: { host: string; port: number } | undefined;
}

// What only a fetch from the hub takes: given with --verify-only, it would be ignored.
const HUB_FLAGS = [
  'endpoint',
  'repo',
  'revision',
  'token-file',
  'proxy',
  'concurrency',
  'lock-file',
] as const;

type Env = Readonly<Record<string, string | undefined>>;

async function readToken(file: string | undefined, env: Env): Promise<string | undefined> {
  let token = env['HF_TOKEN'] || undefined;
  if (file !== undefined) {
    try {
      token = await readFile(file, 'utf8');
    } catch (e) {
      throw new UsageError(
        `cannot read the token file ${file}: ${(e as NodeJS.ErrnoException).code ?? 'error'}`,
      );
    }
  }
  if (token === undefined) return undefined;
  token = token.trim();
  if (token === '') throw new UsageError(`the token ${file ? `file ${file}` : 'in HF_TOKEN'} is empty`);
  // An HTTP header cannot carry the rest; undici's error would not name the file.
  if (!/^[\x21-\x7e]+$/.test(token))
    throw new UsageError(
      `the token ${file ? `in ${file}` : 'in HF_TOKEN'} has characters a header cannot carry (a space or a line break inside?)`,
    );
  return token;
}

function readProxy(flag: string | undefined, env: Env): ProxyConfig | undefined {
  const noProxy = env['NO_PROXY'] ?? env['no_proxy'];
  const httpProxy = flag ?? env['HTTP_PROXY'] ?? env['http_proxy'];
  const httpsProxy = flag ?? env['HTTPS_PROXY'] ?? env['https_proxy'];
  for (const p of [httpProxy, httpsProxy])
    // Not echoed: a proxy URL may carry a user and password.
    if (p !== undefined && p !== '' && !URL.canParse(p)) throw new UsageError('the proxy is not a URL');
  if (!httpProxy && !httpsProxy) return undefined;
  return { httpProxy, httpsProxy, noProxy };
}

async function parseInvocation(argv: string[], env: Env): Promise<Invocation> {
  if (argv.some((a) => a === '--token' || a.startsWith('--token=')))
    throw new UsageError(
      'pass the token in a file (--token-file, a mounted Secret) or HF_TOKEN, never as an argument: ' +
        'the command line is visible to every process on the node',
    );
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        endpoint: { type: 'string' },
        repo: { type: 'string' },
        revision: { type: 'string' },
        digest: { type: 'string' },
        'tokenizer-digest': { type: 'string' },
        'tokenizer-subpath': { type: 'string' },
        dest: { type: 'string' },
        'token-file': { type: 'string' },
        proxy: { type: 'string' },
        concurrency: { type: 'string' },
        'result-file': { type: 'string' },
        'progress-port': { type: 'string' },
        'progress-host': { type: 'string' },
        'verify-only': { type: 'boolean' },
        'lock-file': { type: 'string' },
        'marker-dir': { type: 'string' },
      },
    }));
  } catch (e) {
    throw new UsageError((e as Error).message, { cause: e });
  }
  const common = {
    resultFile: values['result-file'],
    progress: readProgressListen(values['progress-port'], values['progress-host']),
  };
  if (values['verify-only']) {
    const given = HUB_FLAGS.filter((f) => values[f] !== undefined);
    if (given.length > 0)
      throw new UsageError(
        `--verify-only fetches nothing: leave out ${given.map((f) => `--${f}`).join(', ')}`,
      );
    const request = checkVerifyRequest({
      digest: values.digest,
      tokenizerDigest: values['tokenizer-digest'],
      tokenizerSubpath: values['tokenizer-subpath'],
      dest: values.dest,
    });
    if (!request.ok) throw new UsageError(`${FLAGS[request.error.field]} ${request.error.message}`);
    return { work: { mode: 'verify', request: request.value, markerDir: values['marker-dir'] }, ...common };
  }
  if (values['marker-dir'] !== undefined)
    throw new UsageError('--marker-dir goes with --verify-only (a fetch keeps its marker in --dest)');
  const request = checkFetchRequest({
    // An empty variable is an unset one, as the hub's own clients read it.
    endpoint: values.endpoint ?? (env['HF_ENDPOINT'] || 'https://huggingface.co'),
    repo: values.repo,
    revision: values.revision,
    digest: values.digest,
    tokenizerDigest: values['tokenizer-digest'],
    tokenizerSubpath: values['tokenizer-subpath'],
    dest: values.dest,
  });
  if (!request.ok) throw new UsageError(`${FLAGS[request.error.field]} ${request.error.message}`);
  const concurrency = Number(values.concurrency ?? '4');
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 32)
    throw new UsageError('--concurrency takes a whole number from 1 to 32');
  return {
    work: {
      mode: 'fetch',
      request: request.value,
      token: await readToken(values['token-file'], env),
      proxy: readProxy(values.proxy, env),
      concurrency,
      lockFile: values['lock-file'],
    },
    ...common,
  };
}

async function runWork(work: Invocation['work']): Promise<FetchOutcome> {
  if (work.mode === 'fetch') {
    if (work.lockFile === undefined) return fetchModel({ ...work, onProgress });
    const release = await holdNodeLock(work.request.dest, work.lockFile, {
      onWait: () =>
        process.stderr.write(
          `model-fetch: waiting for ${work.lockFile ?? ''}: another fetcher on this node holds it\n`,
        ),
    });
    try {
      return await fetchModel({ ...work, onProgress });
    } finally {
      await release();
    }
  }
  const { dest, ...digests } = work.request;
  return verifyStagedModel({ dir: dest, ...digests, markerDir: work.markerDir, onProgress });
}

function readProgressListen(port: string | undefined, host: string | undefined): Invocation['progress'] {
  if (port === undefined) {
    if (host !== undefined) throw new UsageError('--progress-host needs --progress-port');
    return undefined;
  }
  const n = Number(port);
  if (!/^\d+$/.test(port) || n < 1 || n > 65535)
    throw new UsageError(`--progress-port takes a port from 1 to 65535, not ${JSON.stringify(port)}`);
  // An unexpanded $(POD_IP): the pod's env has no such variable.
  if (host !== undefined && (host === '' || host.includes('$(')))
    throw new UsageError(
      `--progress-host ${JSON.stringify(host)} is no address (set POD_IP from the pod's status.podIP)`,
    );
  return { host: host ?? '::', port: n };
}

/** The progress server, or a usage error that names the address it could not take. */
async function startProgressServer(
  listen: Invocation['progress'],
  current: () => FetchProgress | undefined,
): Promise<ProgressServer | undefined> {
  if (!listen) return undefined;
  try {
    return await serveFetchProgress({ ...listen, current });
  } catch (e) {
    throw new UsageError(
      `cannot serve progress on ${listen.host} port ${listen.port}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      { cause: e },
    );
  }
}

const line = (o: FetchProgress | Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(o)}\n`);
};

let lastProgress: FetchProgress | undefined;
const onProgress = (p: FetchProgress): void => {
  lastProgress = p;
  line(p);
};

// A termination message holds 4096 bytes: the message is cut well before, the fields stay whole.
const RESULT_MESSAGE_CHARS = 1500;
// Failures that a second attempt would repeat: the hub serves these files at this commit.
const PERMANENT_REASONS = new Set(['ModelDigestMismatch', 'UnexpectedFiles']);

async function writeResult(file: string | undefined, o: Record<string, unknown>): Promise<void> {
  if (file === undefined) return;
  const message = typeof o['message'] === 'string' ? o['message'].slice(0, RESULT_MESSAGE_CHARS) : undefined;
  await writeFile(file, JSON.stringify({ ...o, ...(message !== undefined ? { message } : {}) }));
}

async function report(outcome: FetchOutcome, resultFile: string | undefined): Promise<void> {
  if (outcome.ok) {
    line({ phase: 'done', ...outcome });
    await writeResult(resultFile, { phase: 'done', ...outcome });
    return;
  }
  line({ phase: 'failed', ...outcome });
  await writeResult(resultFile, { phase: 'failed', ...outcome });
  process.stderr.write(`model-fetch: ${outcome.reason}: ${outcome.message}\n`);
  process.exitCode = PERMANENT_REASONS.has(outcome.reason) ? 3 : 1;
}

const resultFileArg = (argv: readonly string[]): string | undefined => {
  const at = argv.findIndex((a) => a === '--result-file' || a.startsWith('--result-file='));
  const a = argv[at];
  if (at < 0 || a === undefined) return undefined;
  return a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[at + 1];
};

let progressServer: ProgressServer | undefined;
try {
  const inv = await parseInvocation(process.argv.slice(2), process.env);
  progressServer = await startProgressServer(inv.progress, () => lastProgress);
  await report(await runWork(inv.work), inv.resultFile);
} catch (e) {
  const usage = e instanceof UsageError;
  const message = (e as Error).message;
  const failed = {
    phase: 'failed',
    ok: false,
    reason: usage ? 'InvalidArguments' : 'DownloadFailed',
    message,
  };
  line(failed);
  // Bad arguments still say why where the operator reads it.
  await writeResult(resultFileArg(process.argv.slice(2)), failed).catch(() => undefined);
  process.stderr.write(`model-fetch: ${message}\n${usage ? USAGE : ''}`);
  process.exitCode = usage ? 2 : 1;
} finally {
  await progressServer?.close();
}
