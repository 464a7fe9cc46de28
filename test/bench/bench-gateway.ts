// One gateway replica for the routing benchmark: server.ts's static-routes
// mode, plus the simulator's tokenizer for the served model (sim-tokenizer.ts),
// which the real server loads from --tokenizers DIR. A process of its own, as
// each replica of the tier is: R replicas are R of these.
//
//   node test/bench/bench-gateway.ts --routes routes.json --port P [--host 127.0.0.1]
//        [--log-level warn] [--tokenizer-model sim/llama-8b] [--picker-port 0]
//        [--tier-file tier.json --replica-name NAME]
//
// --picker-port: the endpoint picker (ext_proc, gateway/src/epp) too, over the same Picker, as
// server.ts --mode both serves it; its port is in the `listening` line (pickerPort).
// --tier-file: one replica of a tier sharing load, as server.ts --load-exchange-port with
// --peers-service runs it: the load exchange (fleet/load-exchange.ts) on a port the kernel
// picks (the `listening` line's exchange), dialling the other replicas the file lists
// (tier-file.ts; the bench writes it, as the Service's EndpointSlices list the pods).

import { parseArgs } from 'node:util';
import { build } from '../../gateway/src/app.ts';
import { StaticRoutingTable } from '../../gateway/src/routing/table.ts';
import { loadRoutes, startEndpointPicker } from '../../gateway/src/server.ts';
import { OPEN_DIRECTORY } from '../../gateway/src/tenancy/tenant.ts';
import type { Tokenizer } from '../../gateway/src/tokenize/index.ts';
import { startGatewayTracing } from '../../gateway/src/tracing/start.ts';
import { buildSimTokenizer } from './sim-tokenizer.ts';
import { FileTierPeers } from './tier-file.ts';

const { values } = parseArgs({
  options: {
    routes: { type: 'string' },
    port: { type: 'string', default: '8080' },
    host: { type: 'string', default: '127.0.0.1' },
    'log-level': { type: 'string', default: 'warn' },
    'tokenizer-model': { type: 'string', multiple: true, default: [] },
    'picker-port': { type: 'string' },
    'tier-file': { type: 'string' },
    'replica-name': { type: 'string' },
  },
});
if (values.routes === undefined) {
  process.stderr.write('bench-gateway: --routes is required\n');
  process.exit(2);
}
if ((values['tier-file'] === undefined) !== (values['replica-name'] === undefined)) {
  process.stderr.write('bench-gateway: --tier-file and --replica-name go together\n');
  process.exit(2);
}
const host = values.host ?? '127.0.0.1';
const tierFile = values['tier-file'];
const peers = tierFile !== undefined ? new FileTierPeers(tierFile, values['replica-name'] ?? '') : undefined;
let exchangeBound: (address: string) => void = () => undefined;
const exchangeAddress = new Promise<string>((resolve) => (exchangeBound = resolve));

const tokenizers = new Map<string, Tokenizer>(
  (values['tokenizer-model'] ?? []).map((m) => [m, buildSimTokenizer()]),
);
// As server.ts: traced only when OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT is set (tracing's cost, measured).
const tracing = await startGatewayTracing(process.env);
if (!tracing.ok) {
  process.stderr.write(`bench-gateway: ${tracing.error}\n`);
  process.exit(2);
}
// As server.ts builds it for a static table: metrics on, runtime queues scraped and /ready asked every second.
const app = build({
  table: new StaticRoutingTable(loadRoutes(values.routes)),
  tokenizers,
  logger: { level: values['log-level'] ?? 'warn' },
  defaultMetrics: true,
  scrapeIntervalMs: 1000,
  readyPollIntervalMs: 1000,
  tracer: tracing.value?.tracer,
  ...(peers ? { peers, loadExchange: { port: 0, host, onBound: exchangeBound } } : {}),
});
const stop = (): void =>
  void app
    .close()
    .then(() => tracing.value?.shutdown())
    .then(() => peers?.close())
    .then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
await app.listen({ port: Number(values.port), host });
const picker =
  values['picker-port'] === undefined
    ? undefined
    : await startEndpointPicker(
        app,
        { mode: 'both', port: Number(values['picker-port']), healthPort: 0 },
        host,
        OPEN_DIRECTORY,
        () => true,
      );
// The port bound (the kernel's pick for --port 0), for the bench that started it, at any log level.
const address = app.server.address();
app.log.child({}, { level: 'info' }).info(
  {
    port: typeof address === 'object' && address ? address.port : null,
    ...(picker ? { pickerPort: picker.port } : {}),
    ...(peers ? { exchange: await exchangeAddress } : {}),
  },
  'listening',
);
