// The floor under the endpoint picker: an ext_proc server on the picker's own gRPC stack
// (grpc-js, the same protos, server options and reset allowance) that makes no decision: it
// holds the body, names one fixed upstream and sends the body back unchanged. The overhead
// phase measures Envoy asking it beside Envoy asking the picker, so the report says how much of
// the picker's cost is its routing and how much is a gRPC stream per request in Node.
//
//   node test/bench/ext-proc-floor.ts --upstream 127.0.0.1:P [--port 0]

import { parseArgs } from 'node:util';
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { buildBodyChunks, buildContinue, buildPickHeaders } from '../../gateway/src/epp/answers.ts';
import { extProcService } from '../../gateway/src/epp/protos.ts';
import { allowDataPlaneResets } from '../../gateway/src/epp/stream-resets.ts';

const { values } = parseArgs({
  options: {
    upstream: { type: 'string' },
    port: { type: 'string', default: '0' },
  },
});
const upstream = values.upstream;
if (upstream === undefined) {
  process.stderr.write('ext-proc-floor: --upstream host:port is required\n');
  process.exit(2);
}

/** What the floor reads of a message (as protos.ts decodes it: fields present, nothing else). */
interface Message {
  readonly request_body?: { readonly body?: Buffer; readonly end_of_stream?: boolean };
  readonly response_headers?: object;
}

const server = new Server({ 'grpc.enable_channelz': 0 });
allowDataPlaneResets(server);
server.addService(extProcService(), {
  Process: (call: ServerDuplexStream<Message, object>) => {
    const chunks: Buffer[] = [];
    call.on('data', (m: Message) => {
      if (m.request_body) {
        if (m.request_body.body) chunks.push(m.request_body.body);
        if (!m.request_body.end_of_stream) return;
        call.write(buildPickHeaders([upstream], {}));
        for (const chunk of buildBodyChunks(Buffer.concat(chunks))) call.write(chunk);
      } else if (m.response_headers) call.write(buildContinue('response_headers'));
    });
    call.on('end', () => call.end());
    call.on('error', () => undefined); // Envoy's cancel: nothing to settle
  },
});
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync(`127.0.0.1:${values.port}`, ServerCredentials.createInsecure(), (err, bound) =>
    err ? reject(err) : resolve(bound),
  ),
);
process.stdout.write(`${JSON.stringify({ msg: 'listening', pickerPort: port })}\n`);
process.once('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
