// `model-fetch`: fetches a hub model at a commit, or an object store's prefix, into a directory
// and verifies it against the pinned digests (ADR 0013, ADR 0020); the fetch Job's command. Progress goes to stdout as JSON lines,
// the last one the result (`"phase":"done"` or `"phase":"failed"` with a `reason`); a
// failure is also said in words on stderr. `--result-file` also gets that last line alone
// (the fetch Job points it at the container's termination message, which the operator reads
// without exec or any API access of the Job's). Exit codes: 0 fetched and verified, 1 failed
// (the reason in the last line), 2 bad arguments, 3 the files are not the pinned ones
// (ModelDigestMismatch, UnexpectedFiles: another attempt would fetch the same).
// docs/operations.md#model-fetch.
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { fetchModel, type FetchOutcome } from './fetch.ts';
import type { FetchProgress } from '#api/model-fetch-progress.ts';
import {
  checkFetchRequest,
  checkStoreFetchRequest,
  checkVerifyRequest,
  type FetchRequest,
  type FetchRequestIssue,
  type StoreFetchRequest,
  type VerifyRequest,
} from './fetch-request.ts';
import type { Result } from './manifest.ts';
import type { ProxyConfig } from './hub-client.ts';
import { serveFetchProgress, type ProgressServer } from './progress-server.ts';
import { verifyStagedModel } from './verify-staged.ts';
import { holdNodeLock } from './node-lock.ts';

const USAGE = `usage: model-fetch --repo <org/name> --revision <commit id> --digest sha256:<hex> --tokenizer-digest sha256:<hex> --dest <dir> [options]
       model-fetch --object-store s3://<bucket>/<prefix> --digest sha256:<hex> --tokenizer-digest sha256:<hex> --dest <dir> [options]
       model-fetch --verify-only --digest sha256:<hex> --tokenizer-digest sha256:<hex> --dest <dir> [--tokenizer-subpath <dir>] [--result-file <file>] [--progress-port <port>]
  --endpoint <url>           the hub or a mirror (default: $HF_ENDPOINT, else https://huggingface.co)
  --tokenizer-subpath <dir>  the repository directory the tokenizer digest is over (default: the top)
  --token-file <file>        the hub token, as a mounted Secret (default: $HF_TOKEN); never on the command line
  --object-store <url>       fetch the objects under s3://<bucket>/<prefix> instead of a hub commit; credentials
                             from the AWS SDK's default chain ($AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY,
                             a web identity token, pod identity, instance metadata)
  --store-endpoint <url>     an S3-compatible store's endpoint (default: AWS's for the region)
  --store-region <name>      the bucket's region (default: $AWS_REGION, else us-east-1)
  --store-path-style         address the bucket in the path (most S3-compatible stores want it)
  --proxy <url>              HTTP(S) proxy (default: $HTTPS_PROXY / $HTTP_PROXY, with $NO_PROXY)
  --concurrency <n>          files fetched at once (default 4)
  --result-file <file>       also write the last line there (the fetch Job: /dev/termination-log)
  --verify-only              fetch nothing: verify the files in --dest against the digests
  --lock-file <path>         hold this lock while fetching (a node cache shared by the pods of a node)
  --marker-dir <dir>         with --verify-only: keep a record of the verified files there, and trust it
                             next time for the same, unchanged files
  --progress-port <port>     serve the last progress line on GET /progress while fetching
                             (0: a port the kernel picks, said on stderr)
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

const STORE_FLAGS: Record<keyof StoreFetchRequest, string> = {
  url: '--object-store',
  endpoint: '--store-endpoint',
  region: '--store-region',
  pathStyle: '--store-path-style',
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
        readonly request: FetchRequest | StoreFetchRequest;
        readonly token: string | undefined;
        readonly proxy: ProxyConfig | undefined;
        readonly concurrency: number;
        readonly lockFile: string | undefined;
      }
    | { readonly mode: 'verify'; readonly request: VerifyRequest; readonly markerDir: string | undefined };
  readonly resultFile: string | undefined;
  readonly progress: { host: string; port: number } | undefined;
}

// What only a fetch takes: given with --verify-only, it would be ignored.
const FETCH_FLAGS = [
  'endpoint',
  'repo',
  'revision',
  'token-file',
  'object-store',
  'store-endpoint',
  'store-region',
  'store-path-style',
  'proxy',
  'concurrency',
  'lock-file',
] as const;
// What only a fetch from the hub takes, and only one from an object store.
const HUB_ONLY = ['endpoint', 'repo', 'revision', 'token-file'] as const;
const STORE_ONLY = ['store-endpoint', 'store-region', 'store-path-style'] as const;

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
        'object-store': { type: 'string' },
        'store-endpoint': { type: 'string' },
        'store-region': { type: 'string' },
        'store-path-style': { type: 'boolean' },
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
    const given = FETCH_FLAGS.filter((f) => values[f] !== undefined);
    if (given.length > 0)
      throw new UsageError(
        `--verify-only fetches nothing: leave out ${given.map((f) => `--${f}`).join(', ')}`,
      );
    const request = orUsage(checkVerifyRequest(checkedAgainst(values)), FLAGS);
    return { work: { mode: 'verify', request, markerDir: values['marker-dir'] }, ...common };
  }
  if (values['marker-dir'] !== undefined)
    throw new UsageError('--marker-dir goes with --verify-only (a fetch keeps its marker in --dest)');
  const request = values['object-store'] !== undefined ? storeRequest(values) : hubRequest(values, env);
  const concurrency = Number(values.concurrency ?? '4');
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 32)
    throw new UsageError('--concurrency takes a whole number from 1 to 32');
  return {
    work: {
      mode: 'fetch',
      request,
      token: await readToken(values['token-file'], env),
      proxy: readProxy(values.proxy, env),
      concurrency,
      lockFile: values['lock-file'],
    },
    ...common,
  };
}

type Values = Partial<
  Record<
    (typeof FETCH_FLAGS)[number] | 'digest' | 'tokenizer-digest' | 'tokenizer-subpath' | 'dest',
    string | boolean
  >
>;

const refuseFlags = (values: Values, flags: readonly string[], because: string): void => {
  const given = flags.filter((f) => values[f as keyof Values] !== undefined);
  if (given.length > 0)
    throw new UsageError(`${because}: leave out ${given.map((f) => `--${f}`).join(', ')}`);
};

const stringOf = (v: string | boolean | undefined): string | undefined =>
  typeof v === 'string' ? v : undefined;

/** What every run is held to: the digests, where the tokenizer's are taken, the files. */
const checkedAgainst = (values: Values) => ({
  digest: values.digest,
  tokenizerDigest: values['tokenizer-digest'],
  tokenizerSubpath: values['tokenizer-subpath'],
  dest: values.dest,
});

/** The checked request, or a usage error naming the flag. */
function orUsage<T>(result: Result<T, FetchRequestIssue>, flags: Readonly<Record<string, string>>): T {
  if (result.ok) return result.value;
  throw new UsageError(`${flags[result.error.field] ?? result.error.field} ${result.error.message}`);
}

function hubRequest(values: Values, env: Env): FetchRequest {
  refuseFlags(values, STORE_ONLY, 'a hub fetch has no object store');
  return orUsage(
    checkFetchRequest({
      // An empty variable is an unset one, as the hub's own clients read it.
      endpoint: stringOf(values.endpoint) ?? (env['HF_ENDPOINT'] || 'https://huggingface.co'),
      repo: values.repo,
      revision: values.revision,
      ...checkedAgainst(values),
    }),
    FLAGS,
  );
}

function storeRequest(values: Values): StoreFetchRequest {
  refuseFlags(values, HUB_ONLY, '--object-store fetches from a bucket, not the hub');
  return orUsage(
    checkStoreFetchRequest({
      url: values['object-store'],
      endpoint: values['store-endpoint'],
      region: values['store-region'],
      pathStyle: values['store-path-style'] === true,
      ...checkedAgainst(values),
    }),
    STORE_FLAGS,
  );
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
  if (!/^\d+$/.test(port) || n > 65535)
    throw new UsageError(`--progress-port takes a port from 0 to 65535, not ${JSON.stringify(port)}`);
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
    const served = await serveFetchProgress({ ...listen, current });
    // The port bound (the kernel's pick for port 0), for whoever started the fetcher.
    process.stderr.write(`model-fetch: progress on ${listen.host} port ${served.port}\n`);
    return served;
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
