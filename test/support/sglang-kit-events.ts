// The conformance kit's event commands from TypeScript: a KV-event or load
// stream decoded by SGLang's own classes (`kit decode-events`), and the events
// SGLang's own radix cache records for a list of operations (`kit tree-events`).
// Integers are exact: the kit prints 64-bit block hashes as JSON numbers and
// they are read back as bigint.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { ensureSglangKit, runKit, type KitRunner } from './sglang-kit.ts';

const KIT = resolve(import.meta.dirname, '../../hack/sglang/kit.sh');

const Int64 = z.union([z.number().int(), z.bigint()]).transform((v) => BigInt(v));

export const KvEventJson = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('BlockStored'),
    block_hashes: z.array(Int64),
    parent_block_hash: Int64.nullable(),
    token_ids: z.array(z.number().int()),
    block_size: z.number().int(),
    lora_id: z.number().int().nullable(),
    medium: z.string().optional(),
    cache_salt: z.string().optional(),
  }),
  z.strictObject({
    type: z.literal('BlockRemoved'),
    block_hashes: z.array(Int64),
    medium: z.string().optional(),
  }),
  z.strictObject({ type: z.literal('AllBlocksCleared') }),
]);
export type KvEventJson = z.infer<typeof KvEventJson>;

export const LoadStatJson = z.strictObject({
  num_running_reqs: z.number().int(),
  num_waiting_reqs: z.number().int(),
  num_tokens: z.number().int(),
  max_total_num_tokens: z.number().int(),
  attn_dp_rank: z.number().int().nullable(),
  num_waiting_uncached_tokens: z.number().int(),
  num_total_tokens: z.number().int(),
  max_running_requests: z.number().int(),
  total_prefill_uncached_tokens: Int64,
  total_prefill_busy_us: Int64,
});

export const DecodedMessage = z.object({
  seq: z.number().int(),
  via: z.enum(['live', 'replay', 'stdin']),
  /** SGLang's encoder gave back the very bytes received. */
  reencoded_equal: z.boolean(),
  ts: z.number().optional(),
  dp_rank: z.number().int().nullable().optional(),
  events: z.array(KvEventJson).optional(),
  load: LoadStatJson.optional(),
});
export type DecodedMessage = z.infer<typeof DecodedMessage>;

/** JSON.parse keeping integers past 2^53 exact (as bigint). */
export function parseExactJson(text: string): unknown {
  return JSON.parse(text, (_key, value: unknown, context?: { source?: string }) =>
    typeof value === 'number' && !Number.isSafeInteger(value) && /^-?\d+$/.test(context?.source ?? '')
      ? BigInt(context?.source ?? '0')
      : value,
  );
}

function parseLines<T>(stdout: string, schema: z.ZodType<T>): T[] {
  return stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => schema.parse(parseExactJson(l)));
}

export type EventKind = 'kv' | 'load';

/** Decode captured messages (three frames each) with SGLang's decoder, without sockets. */
export async function decodeFrames(
  messages: readonly (readonly Buffer[])[],
  kind: EventKind = 'kv',
): Promise<DecodedMessage[]> {
  const input = messages.map((m) => JSON.stringify({ frames: m.map((f) => f.toString('hex')) })).join('\n');
  return parseLines(await runKit(['decode-events', '--stdin', '--kind', kind], `${input}\n`), DecodedMessage);
}

export interface SubscribeOptions {
  readonly endpoint: string;
  readonly kind?: EventKind;
  readonly topic?: string;
  /** ROUTER replay endpoint: the stream is made gap-free from `from` on. */
  readonly replay?: string;
  readonly from?: number;
  readonly count: number;
  readonly timeoutS?: number;
}

export interface Subscription {
  /** Subscribed (and the first replay answered): what is published from now on is received. */
  readonly ready: Promise<void>;
  /** Every message, in sequence order, once `count` arrived; rejects on a timeout or a kit failure. */
  readonly messages: Promise<DecodedMessage[]>;
  /** How many messages arrived so far. */
  received(): number;
  stop(): void;
}

/** `kit decode-events` on a live endpoint, as a KV-aware router subscribes. */
export function subscribeEvents(opts: SubscribeOptions): Subscription {
  const args = ['decode-events', '--endpoint', opts.endpoint, '--kind', opts.kind ?? 'kv'];
  if (opts.topic !== undefined) args.push('--topic', opts.topic);
  if (opts.replay !== undefined) args.push('--replay', opts.replay, '--from', String(opts.from ?? 0));
  args.push('--count', String(opts.count), '--timeout', String(opts.timeoutS ?? 60));
  const child = spawn('bash', [KIT, ...args], {
    env: { ...process.env, SGLANG_KIT_VENV: ensureSglangKit() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const err: Buffer[] = [];
  child.stderr.on('data', (b: Buffer) => err.push(b));
  const out: DecodedMessage[] = [];
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((r) => (markReady = r));
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    if (line.trim() === '') return;
    const json = parseExactJson(line);
    if (typeof json === 'object' && json !== null && 'ready' in json) markReady();
    else out.push(DecodedMessage.parse(json));
  });
  const messages = new Promise<DecodedMessage[]>((resolvePromise, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      markReady();
      if (code === 0) resolvePromise(out);
      else {
        const tail = Buffer.concat(err).toString('utf8').trim().split('\n').slice(-15).join('\n');
        reject(new Error(`kit decode-events exited ${code} after ${out.length} messages:\n${tail}`));
      }
    });
  });
  return { ready, messages, received: () => out.length, stop: () => void child.kill('SIGTERM') };
}

/** Everything the replay endpoint still keeps from `from` on, decoded by SGLang (one replay request, no waiting). */
export async function drainReplay(
  opts: {
    readonly endpoint: string;
    readonly replay: string;
    readonly from?: number;
    readonly topic?: string;
  },
  kit: KitRunner = runKit,
): Promise<DecodedMessage[]> {
  const args = ['decode-events', '--endpoint', opts.endpoint, '--replay', opts.replay];
  args.push('--from', String(opts.from ?? 0), '--drain');
  if (opts.topic !== undefined) args.push('--topic', opts.topic);
  return parseLines(await kit(args), DecodedMessage);
}

export type TreeOp =
  | {
      readonly op: 'match' | 'insert';
      readonly tokens: readonly number[];
      readonly cache_salt?: string;
      readonly extra_key?: string;
    }
  | { readonly op: 'evict'; readonly tokens: number }
  | { readonly op: 'reset' }
  | { readonly op: 'take' };

const TakeLine = z.object({ events: z.array(KvEventJson) });

/**
 * The events SGLang's own radix cache records for `ops`: one list per `take`. A fresh cache each
 * call, whichever `kit` runs it (a test asking many times passes a session's).
 */
export async function treeEvents(
  pageSize: number,
  ops: readonly TreeOp[],
  kit: KitRunner = runKit,
): Promise<KvEventJson[][]> {
  const input = ops.map((o) => JSON.stringify(o)).join('\n');
  const stdout = await kit(['tree-events', '--page-size', String(pageSize)], `${input}\n`);
  return parseLines(stdout, TakeLine).map((t) => t.events);
}
