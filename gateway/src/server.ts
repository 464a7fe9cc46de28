// Listen: `node gateway/src/server.ts [--kubeconfig f] [--namespace a,b] [--port 8080] [--host 0.0.0.0]`.
// In a tier of replicas, `--peers-service <the gateway Service>` (with the pod's
// name and namespace, from flags or $POD_NAME/$POD_NAMESPACE) divides each
// CachePolicy's admission bounds among the replicas that take traffic;
// `--load-exchange-port P` (the same on every replica) also shares the runtimes'
// load among them: each publishes its share on P and hears every other's
// (fleet/load-exchange.ts), so each routes on the tier's load, not its own part.
// `--tokenizers DIR` holds each served model's tokenizer files (DIR/<served name>/
// tokenizer.json, tokenizer_config.json): text prompts are then tokenized as the
// runtime tokenizes them and matched exactly against its KV events.
// `--admin-port P` serves /status, /status.json, /metrics, /healthz and /readyz on a
// listener of their own (host: --admin-host, default --host), and the API port
// then serves only the API; without it, all share the API port.
// Port 0 (either flag) takes a port the kernel picks; the `listening` log line
// (info, written at any --log-level but silent) says which, so whoever started
// the process reads it there.
// Every routed runtime's /ready is asked every --runtime-ready-interval-ms
// (default 1000, 0: never): one that answers 503 (SGLang after SIGTERM) leaves
// every pick until it answers 200 (endpoints/runtime-ready.ts).
// A client has --request-timeout-seconds (default 60) to send its request and a
// connection closes after --connection-timeout-seconds (default 600) with no
// traffic either way (request/client-timeouts.ts). Every runtime's KV index
// together holds at most --kv-index-max-blocks blocks (default 4,194,304, about
// 130 MB); past it the largest index gives up its oldest (kv-index/block-budget.ts).
// SIGTERM drains: /readyz turns 503 and new requests get 503 GW_DRAINING at
// once, requests in flight (streams included) finish for up to
// --drain-timeout-seconds, then the process exits 0.
// `--auth keys` (the default) needs a tenant's API key on every API request
// (`Authorization: Bearer <key>`): Tenants come from discovery and the digests
// of their keys from `--keys-secret` (NAME in --pod-namespace, or NAMESPACE/NAME:
// the one Secret the operator keeps for the gateway, with the runtimes' keys;
// ADR 0027), or with --routes from `--tenants tenants.json`
// (tenancy/static-file.ts). `--auth open` checks nothing, and says so at start,
// on /status and in cacheroute_gateway_auth_open.
// `--redis-url-file F` (or $CACHEROUTE_REDIS_URL; `--redis-url` only for a URL
// without a password) shares reuse results across replicas, signed with the key
// in `--reuse-hmac-key-file` (required with Redis; reuse/redis-flags.ts).
// `--mode picker` serves Envoy's ext_proc (GIE's endpoint picker protocol, epp/) on
// --picker-port (9002) and gRPC health on --picker-health-port (9003), TLS with
// --picker-tls-cert and --picker-tls-key; the API port then serves only the admin
// routes. `--mode both`: the proxy too, over the same Picker. Default: standalone.
// `--picker-conformance-hooks` (tests only, off by default): GIE's conformance test
// hooks, with which a client names its own endpoint (epp/conformance-hooks.ts).
// The routing table comes from Deployment and CachePolicy status (discovery/,
// default kubeconfig: $KUBECONFIG, ~/.kube/config, then in-cluster), or with
// `--routes routes.json` from a JSON file: an array of ModelRoute objects
// (routing/table.ts); settings objects are parsed with the CachePolicy
// schemas, so defaults apply.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { Admission, RequestRules, ResultReuse, RoutingSettings } from '#api';
import { build, type BuildOptions } from './app.ts';
import { DecodeEstimate } from './epp/decode-estimate.ts';
import { parsePickerFlags, type PickerFlags } from './epp/flags.ts';
import { startPickerServer, type PickerServer } from './epp/server.ts';
import { openRouteSource, parseRouteSourceFlags, type Discovery, type Parsed } from './discovery/source.ts';
import { DEFAULT_GATEWAY_MAX_BLOCKS } from './kv-index/block-budget.ts';
import { parseClientTimeoutFlags } from './request/client-timeouts.ts';
import { parseRedisFlags } from './reuse/redis-flags.ts';
import type { ModelRoute } from './routing/table.ts';
import { loadTenantFile } from './tenancy/static-file.ts';
import { OPEN_DIRECTORY, type KeyDirectory, type TenantDirectory } from './tenancy/tenant.ts';
import { loadTokenizerDirectory, type LoadedTokenizers } from './tokenize/registry.ts';
import { startGatewayTracing } from './tracing/start.ts';
import type { RequestTracer } from './tracing/types.ts';

const RouteFile = z.array(
  z.looseObject({
    model: z.string(),
    deployment: z.string(),
    fingerprint: z.string(),
    salt: z.string(),
    routing: RoutingSettings.prefault({}),
    admission: Admission.prefault({}),
    reuse: ResultReuse.prefault({}),
    requests: RequestRules.optional(),
    endpoints: z.array(
      z.object({
        id: z.string(),
        url: z.string(),
        role: z.enum(['standalone', 'prefill', 'decode']).default('standalone'),
        fingerprint: z.string(),
        verified: z.boolean(),
        ready: z.boolean(),
        bootstrapPort: z.number().int().optional(),
        generation: z.string().optional(),
        events: z
          .object({
            kv: z.array(z.string()).min(1),
            replay: z.array(z.string()).optional(),
            topic: z.string().default(''),
            blockSize: z.number().int().positive(),
            load: z.array(z.string()).optional(),
            loadTopic: z.string().optional(),
          })
          .optional(),
      }),
    ),
  }),
);

export function loadRoutes(path: string): ModelRoute[] {
  return RouteFile.parse(JSON.parse(readFileSync(path, 'utf8'))) as ModelRoute[];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      routes: { type: 'string' },
      kubeconfig: { type: 'string' },
      namespace: { type: 'string', multiple: true },
      port: { type: 'string', default: '8080' },
      host: { type: 'string', default: '0.0.0.0' },
      'log-level': { type: 'string', default: 'info' },
      // Share exact-reuse results (and in-flight de-duplication) across replicas (reuse/redis-flags.ts).
      'redis-url': { type: 'string' },
      'redis-url-file': { type: 'string' },
      'redis-max-entries': { type: 'string', default: '10000' },
      'reuse-hmac-key-file': { type: 'string' },
      'reuse-hmac-previous-key-file': { type: 'string' },
      'peers-service': { type: 'string' },
      'load-exchange-port': { type: 'string' },
      'pod-name': { type: 'string', default: process.env['POD_NAME'] },
      'pod-namespace': { type: 'string', default: process.env['POD_NAMESPACE'] },
      'keys-secret': { type: 'string' },
      'drain-timeout-seconds': { type: 'string', default: '25' },
      'runtime-ready-interval-ms': { type: 'string', default: '1000' },
      'request-timeout-seconds': { type: 'string' },
      'connection-timeout-seconds': { type: 'string' },
      'kv-index-max-blocks': { type: 'string' },
      tokenizers: { type: 'string' },
      'admin-port': { type: 'string' },
      'admin-host': { type: 'string' },
      auth: { type: 'string', default: 'keys' },
      tenants: { type: 'string' },
      mode: { type: 'string', default: 'standalone' },
      'picker-port': { type: 'string' },
      'picker-health-port': { type: 'string' },
      'picker-tls-cert': { type: 'string' },
      'picker-tls-key': { type: 'string' },
      'picker-conformance-hooks': { type: 'boolean' },
    },
  });
  const picker = parsePickerFlags(values);
  if (!picker.ok) exitWithUsage(picker.error);
  const flags = parseRouteSourceFlags(values);
  if (!flags.ok) exitWithUsage(flags.error);
  const timing = parseTimingFlags(values);
  if (!timing.ok) exitWithUsage(timing.error);
  const clientTimeouts = parseClientTimeoutFlags(values);
  if (!clientTimeouts.ok) exitWithUsage(clientTimeouts.error);
  const kvIndexMaxBlocks = parseKvIndexMaxBlocks(values['kv-index-max-blocks']);
  if (!kvIndexMaxBlocks.ok) exitWithUsage(kvIndexMaxBlocks.error);
  const ports = parseListenPorts(values.port, values['admin-port']);
  const redis = parseRedisFlags(values, process.env, (path) => readFileSync(path));
  if (!redis.ok) exitWithUsage(redis.error);
  const exchangePort = parseLoadExchangePort(values['load-exchange-port']);
  const auth = parseAuthFlags(values, flags.value.kind);
  if (!auth.ok) exitWithUsage(auth.error);
  const source = await openRouteSource(flags.value, loadRoutes, {
    tenants: auth.value.mode === 'keys',
  }).catch((err: unknown) => exitWithUsage(err instanceof Error ? err.message : String(err)));
  const tenants = auth.value.tenantsFile ? loadTenantsOrExit(auth.value.tenantsFile) : source.tenants;
  const table = source.table;
  const peers = source.peers;
  const runtimeKeys = source.runtimeKeys;
  const tokenizers = values.tokenizers ? await loadTokenizers(values.tokenizers) : undefined;
  const tracing = await startTracingOrExit();
  const app = build({
    table,
    discoveryIssues: () => source.issues(),
    qualifications: () => source.qualifications(),
    clientTimeouts: clientTimeouts.value,
    kvIndexMaxBlocks: kvIndexMaxBlocks.value,
    ...(tokenizers ? { tokenizers: tokenizers.tokenizers } : {}),
    ...buildTierOptions(peers, tenants, runtimeKeys),
    ...(exchangePort !== undefined ? { loadExchange: { port: exchangePort } } : {}),
    logger: { level: values['log-level'] },
    defaultMetrics: true,
    scrapeIntervalMs: 1000,
    readyPollIntervalMs: timing.value.readyPollIntervalMs,
    separateAdmin: ports.admin !== undefined,
    tracer: tracing.tracer,
    ...(redis.value ? { redis: redis.value } : {}),
    generationApi: picker.value.mode !== 'picker',
  });
  app.addHook('onClose', () => source.close());
  tracing.exportUntilClose(app);
  if (tokenizers) {
    app.log.info({ models: [...tokenizers.tokenizers.keys()] }, 'tokenizers loaded');
    for (const { model, issue } of tokenizers.issues)
      app.log.error(
        { model, file: issue.file },
        `tokenizer not loaded, ${model} routes by approximate tokens: ${issue.message}`,
      );
  }
  source.start(app.log);
  const epp =
    picker.value.mode === 'standalone'
      ? undefined
      : await startEndpointPicker(
          app,
          picker.value,
          values.host,
          tenants ?? OPEN_DIRECTORY,
          () => table.ready,
        );
  const shutdown = (signal: NodeJS.Signals): void => {
    epp?.notServing();
    void drainAndClose(app, signal, timing.value.drainTimeoutMs)
      .then(() => epp?.close())
      .then(() => process.exit(0));
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
  await listen(app, ports, values.host, values['admin-host'] ?? values.host, epp);
}

/**
 * The ext_proc endpoint picker (epp/) over the proxy's own Picker, endpoint book and KV
 * indexes: one routing state, whichever front end a request comes through.
 */
export async function startEndpointPicker(
  app: FastifyInstance,
  flags: PickerFlags,
  host: string,
  tenants: TenantDirectory,
  ready: () => boolean,
): Promise<PickerServer & { readonly decodeEstimate: DecodeEstimate }> {
  const gateway = app.gateway;
  // Behind Envoy the answers stream past the picker: their progress is estimated (ADR 0043).
  const decodeEstimate = new DecodeEstimate(gateway.clock);
  // Output lengths the runtimes' KV events measure calibrate it (ADR 0049).
  gateway.kvIndex.onOutput((endpoint, measured) => decodeEstimate.measured(endpoint, measured));
  const server = await startPickerServer(
    {
      picker: gateway.picker,
      book: gateway.book,
      kvIndex: gateway.kvIndex,
      clock: gateway.clock,
      tenants,
      log: app.log.child({ frontEnd: 'ext_proc' }),
      bodyLimitBytes: PICKER_BODY_LIMIT_BYTES,
      fallbacks: PICKER_FALLBACKS,
      draining: () => app.drain.draining,
      sendPrefill: (prefill, path, body) => gateway.sendPrefill(prefill, path, body),
      authorizationFor: (endpoint) => gateway.authorizationFor(endpoint),
      ...(flags.conformanceHooks ? { conformanceHooks: true } : {}),
      decodeEstimate,
    },
    {
      host,
      port: flags.port,
      healthPort: flags.healthPort,
      ...(flags.tls ? { tls: flags.tls } : {}),
      ready: () => !app.drain.draining && ready(),
    },
  ).catch((err: unknown) =>
    exitWithUsage(`--picker-port/--picker-health-port: ${err instanceof Error ? err.message : String(err)}`),
  );
  return {
    ...server,
    decodeEstimate,
    close: async () => {
      gateway.kvIndex.onOutput(undefined);
      decodeEstimate.close();
      await server.close();
    },
  };
}

/** As the proxy's API takes (app.ts bodyLimit). */
const PICKER_BODY_LIMIT_BYTES = 64 * 1024 * 1024;
/** Endpoints named after the pick in `envoy.lb`, for a data plane's retries. */
const PICKER_FALLBACKS = 2;

/** --load-exchange-port: absent, no exchange; else a port (exit 2 naming the flag). */
function parseLoadExchangePort(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const port = ListenPort.safeParse(raw);
  if (!port.success) exitWithUsage(`--load-exchange-port: ${port.error.issues[0]?.message ?? 'invalid'}`);
  return port.data;
}

/** --port and --admin-port (absent: no listener of its own), or exit 2 naming the flag. */
function parseListenPorts(
  port: string,
  adminPort: string | undefined,
): { readonly api: number; readonly admin: number | undefined } {
  const api = ListenPort.safeParse(port);
  if (!api.success) exitWithUsage(`--port: ${api.error.issues[0]?.message ?? 'invalid'}`);
  if (adminPort === undefined) return { api: api.data, admin: undefined };
  const admin = ListenPort.safeParse(adminPort);
  if (!admin.success) exitWithUsage(`--admin-port: ${admin.error.issues[0]?.message ?? 'invalid'}`);
  return { api: api.data, admin: admin.data };
}

async function listen(
  app: FastifyInstance,
  ports: { readonly api: number; readonly admin: number | undefined },
  host: string,
  adminHost: string,
  epp: PickerServer | undefined,
): Promise<void> {
  await app.listen({ port: ports.api, host });
  if (ports.admin !== undefined) await app.admin.listen({ port: ports.admin, host: adminHost });
  // The ports bound, the kernel's picks for port 0: a line the launcher reads, so above --log-level too.
  const startup = app.log.level === 'silent' ? app.log : app.log.child({}, { level: 'info' });
  startup.info(
    {
      port: boundPort(app),
      ...(ports.admin !== undefined ? { adminPort: boundPort(app.admin) } : {}),
      ...(epp ? { pickerPort: epp.port, pickerHealthPort: epp.healthPort } : {}),
    },
    'listening',
  );
}

function boundPort(app: FastifyInstance): number | null {
  const address = app.server.address();
  return address !== null && typeof address === 'object' ? address.port : null;
}

/** Off unless OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT is set (docs/operations.md#tracing). */
async function startTracingOrExit(): Promise<{
  tracer: RequestTracer | undefined;
  exportUntilClose(app: FastifyInstance): void;
}> {
  const started = await startGatewayTracing(process.env);
  const tracing = started.ok ? started.value : exitWithUsage(started.error);
  return {
    tracer: tracing?.tracer,
    exportUntilClose(app) {
      if (!tracing) return;
      app.log.info({ otlp: tracing.url }, 'tracing: spans exported over OTLP');
      // After the app's own hooks: the spans of the last requests are exported before exit.
      app.addHook('onClose', tracing.shutdown);
    },
  };
}

function loadTenantsOrExit(path: string): KeyDirectory {
  try {
    return loadTenantFile(path);
  } catch (err) {
    return exitWithUsage(
      `--tenants: cannot use ${path}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

const AuthMode = z.enum(['keys', 'open'], { error: 'give keys (API keys of Tenants) or open (no keys)' });

/** The tier, the tenants and the runtimes' keys, and readiness waiting for all to have synced. */
function buildTierOptions(
  peers: Discovery['peers'],
  tenants: TenantDirectory | undefined,
  runtimeKeys: Discovery['runtimeKeys'],
): Pick<BuildOptions, 'peers' | 'tenants' | 'ready' | 'runtimeKeys'> {
  return {
    ready: () => (peers?.synced() ?? true) && (tenants?.ready ?? true) && (runtimeKeys?.ready ?? true),
    ...(peers ? { peers } : {}),
    ...(runtimeKeys ? { runtimeKeys } : {}),
    ...(tenants ? { tenants } : {}),
  };
}

/** --auth and --tenants: who may call, and where tenants come from with a static table. */
export function parseAuthFlags(
  values: { readonly auth?: string | undefined; readonly tenants?: string | undefined },
  source: 'static' | 'discovery',
): Parsed<{ mode: 'keys' | 'open'; tenantsFile?: string }> {
  const mode = AuthMode.safeParse(values.auth ?? 'keys');
  if (!mode.success) return { ok: false, error: `--auth: ${mode.error.issues[0]?.message ?? 'invalid'}` };
  const file = values.tenants;
  if (file && (mode.data === 'open' || source !== 'static'))
    return {
      ok: false,
      error:
        '--tenants reads tenants from a file for --routes with --auth keys; with discovery, apply Tenant objects',
    };
  if (mode.data === 'keys' && source === 'static' && !file)
    return {
      ok: false,
      error: '--auth keys with --routes needs --tenants FILE (the tenants and their keys), or --auth open',
    };
  return { ok: true, value: { mode: mode.data, ...(file ? { tenantsFile: file } : {}) } };
}

async function loadTokenizers(dir: string): Promise<LoadedTokenizers> {
  return loadTokenizerDirectory(dir).catch((err: unknown) =>
    exitWithUsage(`--tokenizers: cannot read ${dir}: ${err instanceof Error ? err.message : String(err)}`),
  );
}

const MaxBlocks = z.coerce
  .number({ error: 'give a number of blocks' })
  .int('give a whole number of blocks')
  .min(1024, 'give 1024 blocks or more');

/** --kv-index-max-blocks: every KV index together (kv-index/block-budget.ts); default 4,194,304. */
export function parseKvIndexMaxBlocks(raw: string | undefined): Parsed<number> {
  const r = MaxBlocks.safeParse(raw ?? String(DEFAULT_GATEWAY_MAX_BLOCKS));
  return r.success
    ? { ok: true, value: r.data }
    : { ok: false, error: `--kv-index-max-blocks: ${r.error.issues[0]?.message ?? 'invalid'}` };
}

const ListenPort = z.coerce
  .number({ error: 'give a port number' })
  .int('give a port number')
  .min(0, 'give a port from 0 to 65535 (0: one the kernel picks)')
  .max(65535, 'give a port from 0 to 65535 (0: one the kernel picks)');

const DrainTimeout = z.coerce
  .number({ error: 'give a number of seconds' })
  .int('give whole seconds')
  .min(0, 'give 0 or more seconds');

const ReadyInterval = z.coerce
  .number({ error: 'give a number of milliseconds' })
  .int('give whole milliseconds')
  .min(0, 'give 0 (never) or more milliseconds');

/** --drain-timeout-seconds and --runtime-ready-interval-ms. */
export function parseTimingFlags(values: {
  readonly 'drain-timeout-seconds'?: string | undefined;
  readonly 'runtime-ready-interval-ms'?: string | undefined;
}): Parsed<{ drainTimeoutMs: number; readyPollIntervalMs: number }> {
  const drain = DrainTimeout.safeParse(values['drain-timeout-seconds'] ?? '25');
  if (!drain.success)
    return { ok: false, error: `--drain-timeout-seconds: ${drain.error.issues[0]?.message ?? 'invalid'}` };
  const ready = ReadyInterval.safeParse(values['runtime-ready-interval-ms'] ?? '1000');
  if (!ready.success)
    return {
      ok: false,
      error: `--runtime-ready-interval-ms: ${ready.error.issues[0]?.message ?? 'invalid'}`,
    };
  return { ok: true, value: { drainTimeoutMs: drain.data * 1000, readyPollIntervalMs: ready.data } };
}

// How long a draining replica keeps its listener even when idle: a Service (kube-proxy on
// every node) may still send it new connections after the preStop sleep, and those get a
// retryable 503 GW_DRAINING instead of a refused or reset connection.
const DRAIN_LINGER_MS = 2000;

/** Stop taking requests, let those in flight finish up to `timeoutMs`, then close (cutting what is left). */
async function drainAndClose(app: FastifyInstance, signal: string, timeoutMs: number): Promise<void> {
  const started = Date.now();
  app.drain.begin();
  // Keep-alive connections stay open: closing one races a request the client is sending on it
  // (a reset, not a retryable answer). Each next answer says `Connection: close` instead.
  app.log.info({ signal, inFlight: app.drain.inFlight, timeoutMs }, 'draining');
  const idle = await app.drain.waitIdle(timeoutMs);
  const linger = Math.min(timeoutMs, DRAIN_LINGER_MS) - (Date.now() - started);
  if (linger > 0) await new Promise((r) => setTimeout(r, linger));
  if (!idle) {
    app.log.warn({ cut: app.drain.inFlight }, 'drain timed out: closing the requests still in flight');
    app.server.closeAllConnections();
  }
  await app.close();
}

function exitWithUsage(message: string): never {
  process.stderr.write(`gateway: ${message}\n`);
  process.exit(2);
}

if (import.meta.main) await main();
