// Replay a Mooncake JSONL trace against SGLang-compatible servers.
//
//   node test/bench/replay.ts --trace FILE --url URL[,URL...] [--n 2000] [--scale 10]
//        [--mode chat|generate] [--skip 0] [--model NAME (default: the first of /v1/models)] [--max-output N] [--out records.jsonl]
//
// Requests are sent open-loop at their trace timestamps divided by --scale.
// With several URLs (comma-separated or repeated --url) requests go round-robin;
// with one URL (a server or a gateway) all go there and the x-sim-worker
// response header tells which worker served. Prints one JSON summary line last.

import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { postStream } from './replay-client.ts';
import {
  buildPromptIds,
  buildPromptText,
  computeBound,
  parseTrace,
  type TraceRecord,
} from './replay-trace.ts';
import { buildStreamRecord, computeSummary, type RequestRecord } from './replay-stats.ts';

function usage(message: string): never {
  console.error(`replay: ${message}`);
  console.error(
    'usage: replay.ts --trace FILE --url URL[,URL...] [--n N] [--scale S] [--mode generate|chat] [--skip K] [--max-output N] [--out FILE]',
  );
  process.exit(2);
}

function buildBody(
  mode: string,
  rec: TraceRecord,
  model: string,
  maxOutput: number,
): { path: string; body: unknown } {
  const maxNew = Math.max(1, Math.min(rec.output_length, maxOutput));
  if (mode === 'chat') {
    return {
      path: '/v1/chat/completions',
      body: {
        model,
        messages: [{ role: 'user', content: buildPromptText(rec) }],
        max_tokens: maxNew,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true },
      },
    };
  }
  return {
    path: '/generate',
    body: {
      input_ids: buildPromptIds(rec),
      sampling_params: { max_new_tokens: maxNew, ignore_eos: true },
      stream: true,
    },
  };
}

/** The first model a server (or gateway) lists, for the chat requests' `model` field. */
async function fetchModelId(base: string): Promise<string> {
  try {
    const res = await fetch(new URL('/v1/models', base), { signal: AbortSignal.timeout(5000) });
    const body = (await res.json()) as { data?: { id?: string }[] };
    return body.data?.[0]?.id ?? 'default';
  } catch {
    return 'default';
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      trace: { type: 'string' },
      url: { type: 'string', multiple: true },
      n: { type: 'string', default: '2000' },
      scale: { type: 'string', default: '1' },
      mode: { type: 'string', default: 'chat' },
      skip: { type: 'string', default: '0' },
      model: { type: 'string' },
      'max-output': { type: 'string', default: '1000000' },
      out: { type: 'string' },
    },
  });
  if (!values.trace) usage('--trace is required');
  const urls = (values.url ?? []).flatMap((u) => u.split(',')).filter((u) => u !== '');
  if (urls.length === 0) usage('--url is required');
  const n = Number(values.n);
  const scale = Number(values.scale);
  const skip = Number(values.skip);
  const maxOutput = Number(values['max-output']);
  if (!(n > 0) || !(scale > 0) || !(skip >= 0) || !(maxOutput > 0))
    usage('--n, --scale, --max-output must be > 0');
  if (values.mode !== 'generate' && values.mode !== 'chat') usage('--mode is generate or chat');
  const parsed = parseTrace(readFileSync(values.trace, 'utf8'), n, skip);
  if (!parsed.ok) usage(parsed.error);
  const records = parsed.value;
  const model = values.model ?? (await fetchModelId(urls[0] ?? ''));
  const bound = computeBound(records);
  const t0 = records[0]?.timestamp ?? 0;
  const start = performance.now();
  const results: RequestRecord[] = [];
  const pending = records.map(
    (rec, i) =>
      new Promise<void>((resolve) => {
        const at = (rec.timestamp - t0) / scale;
        setTimeout(() => {
          const base = urls[i % urls.length] ?? '';
          const { path, body } = buildBody(values.mode ?? 'chat', rec, model, maxOutput);
          const sentAtMs = performance.now() - start;
          void postStream(new URL(path, base), body).then((o) => {
            results.push(buildStreamRecord(i, o, sentAtMs, base));
            resolve();
          });
        }, at);
      }),
  );
  await Promise.all(pending);
  const duration = performance.now() - start;
  results.sort((a, b) => a.index - b.index);
  if (values.out) writeFileSync(values.out, results.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const errors = results.filter((r) => !r.ok);
  if (errors.length > 0)
    console.error(`replay: ${errors.length} failed, first: ${JSON.stringify(errors[0])}`);
  console.log(JSON.stringify(computeSummary(results, bound.hitRate, duration, scale)));
}

await main();
