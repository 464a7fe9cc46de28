// A real OTLP receiver for a test: hack/otlp-receiver, a minimal OpenTelemetry Collector
// (the collector's own OTLP/HTTP receiver, spans appended as OTLP JSON lines to a file),
// on loopback, a free port (fresh-ports.ts: the collector does not say what port 0 bound), a temp dir; stopped by stop() and on every other exit path
// by processes.ts. `make otlp-receiver` builds it once into the cache.

import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { withFreshPorts } from './fresh-ports.ts';
import { httpStatus, registerCleanup, spawnManaged, stopManaged, waitUntilAnswering } from './processes.ts';

const SOURCE_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../hack/otlp-receiver');

/** A received span, flattened from OTLP JSON. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root. */
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: 'unspecified' | 'internal' | 'server' | 'client' | 'producer' | 'consumer';
  readonly service: string;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  readonly status: 'unset' | 'ok' | 'error';
  readonly events: readonly string[];
}

export interface RunningOtlpReceiver {
  /** The OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT). */
  readonly url: string;
  /** Every span received so far. */
  spans(): ReceivedSpan[];
  stop(): Promise<void>;
}

const AnyValue = z.object({
  stringValue: z.string().optional(),
  intValue: z.union([z.string(), z.number()]).optional(),
  doubleValue: z.number().optional(),
  boolValue: z.boolean().optional(),
});
const KeyValue = z.object({ key: z.string(), value: AnyValue });
const Span = z.object({
  traceId: z.string(),
  spanId: z.string(),
  parentSpanId: z.string().optional(),
  name: z.string(),
  kind: z.number().optional(),
  attributes: z.array(KeyValue).optional(),
  status: z.object({ code: z.number().optional() }).optional(),
  events: z.array(z.object({ name: z.string() })).optional(),
});
const ExportLine = z.object({
  resourceSpans: z.array(
    z.object({
      resource: z.object({ attributes: z.array(KeyValue).optional() }).optional(),
      scopeSpans: z.array(z.object({ spans: z.array(Span).optional() })).optional(),
    }),
  ),
});

const KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'] as const;
const STATUSES = ['unset', 'ok', 'error'] as const;

/** OTLP_RECEIVER, else where hack/build-otlp-receiver.sh puts the build of these sources. */
export function findOtlpReceiver(env: NodeJS.ProcessEnv = process.env): string {
  const cache =
    env['CACHEROUTE_CACHE'] ?? join(env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'cacheroute');
  const hash = createHash('sha256')
    .update(Buffer.concat(['main.go', 'go.mod', 'go.sum'].map((f) => readFileSync(join(SOURCE_DIR, f)))))
    .digest('hex')
    .slice(0, 12);
  const bin = env['OTLP_RECEIVER'] ?? join(cache, `otlp-receiver-${hash}`, 'bin', 'otlp-receiver');
  try {
    accessSync(bin, constants.X_OK);
  } catch {
    throw new Error(
      `${bin} is missing: run \`make otlp-receiver\` (builds it once into the cache), or set OTLP_RECEIVER`,
    );
  }
  return bin;
}

export function startOtlpReceiver(opts: { startTimeoutMs?: number } = {}): Promise<RunningOtlpReceiver> {
  const bin = findOtlpReceiver();
  return withFreshPorts(1, ([port = 0]) => startOtlpReceiverOn(bin, port, opts), { what: 'otlp-receiver' });
}

async function startOtlpReceiverOn(
  bin: string,
  port: number,
  opts: { startTimeoutMs?: number },
): Promise<RunningOtlpReceiver> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-otlp-'));
  const removeDir = (): void => rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  const unregister = registerCleanup(removeDir);
  const out = join(dir, 'spans.jsonl');
  const config = join(dir, 'config.yaml');
  writeFileSync(config, buildConfig(port, out));
  const logPath = join(dir, 'receiver.log');
  const proc = spawnManaged('otlp-receiver', bin, ['--config', config], { logPath, cwd: dir });
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      await stopManaged(proc);
      unregister();
      removeDir();
    })());
  const url = `http://127.0.0.1:${port}`;
  try {
    // An empty POST is refused (400/415) once the receiver listens: that is all we ask (another
    // server on the port would not know /v1/traces).
    const listening = async (): Promise<boolean> =>
      [400, 415].includes((await httpStatus(`${url}/v1/traces`, { method: 'POST' })) ?? 0);
    await waitUntilAnswering(proc, listening, {
      what: 'on /v1/traces',
      timeoutMs: opts.startTimeoutMs ?? 30_000,
      intervalMs: 100,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, spans: () => readSpans(out), stop };
}

function readSpans(file: string): ReceivedSpan[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .flatMap((line) =>
      ExportLine.parse(JSON.parse(line)).resourceSpans.flatMap((rs) => {
        const service = String(toRecord(rs.resource?.attributes)['service.name'] ?? '');
        return (rs.scopeSpans ?? []).flatMap((ss) =>
          (ss.spans ?? []).map((s): ReceivedSpan => ({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            name: s.name,
            kind: KINDS[s.kind ?? 0] ?? 'unspecified',
            service,
            attributes: toRecord(s.attributes),
            status: STATUSES[s.status?.code ?? 0] ?? 'unset',
            events: (s.events ?? []).map((e) => e.name),
          })),
        );
      }),
    );
}

function toRecord(kvs: z.infer<typeof KeyValue>[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value: v } of kvs ?? []) {
    const value =
      v.stringValue ??
      (v.intValue === undefined ? undefined : Number(v.intValue)) ??
      v.doubleValue ??
      v.boolValue;
    if (value !== undefined) out[key] = value;
  }
  return out;
}

function buildConfig(port: number, out: string): string {
  return `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${port}
exporters:
  jsonlines:
    path: ${JSON.stringify(out)}
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jsonlines]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
`;
}
