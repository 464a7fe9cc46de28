// The endpoint picker's gRPC servers: Envoy's ext_proc service (one
// PickerExchange per stream) on one port, gRPC health on another
// (`liveness`, `readiness`, and the ext_proc service's own name, as GIE's
// protocol lists them). Plaintext unless a certificate and key are given.

import { readFileSync } from 'node:fs';
import {
  Server,
  ServerCredentials,
  status,
  type ServerDuplexStream,
  type ServerOptions,
} from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { newRequestId } from '../request/request-id.ts';
import { PickerExchange, type PickerHost } from './exchange.ts';
import { readProcessingRequest } from './messages.ts';
import { EXT_PROC_SERVICE, extProcService } from './protos.ts';
import { allowDataPlaneResets } from './stream-resets.ts';

export interface PickerServerOptions {
  readonly host: string;
  /** ext_proc; 0: one the kernel picks. */
  readonly port: number;
  /** gRPC health; 0: one the kernel picks. */
  readonly healthPort: number;
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  /** Readiness: asked every second (the routing table has synced, the tier is known). */
  readonly ready: () => boolean;
}

export interface PickerServer {
  readonly port: number;
  readonly healthPort: number;
  /** Readiness and the ext_proc service say NOT_SERVING (a drain); liveness stays. */
  notServing(): void;
  close(): Promise<void>;
}

/**
 * No channelz (gRPC's introspection service, which the picker does not serve): grpc-js otherwise
 * keeps per-call and per-message counters and timestamps on every stream, a request's cost here.
 */
const SERVER_OPTIONS: ServerOptions = { 'grpc.enable_channelz': 0 };

type Stream = ServerDuplexStream<unknown, Record<string, unknown>>;

export async function startPickerServer(host: PickerHost, opts: PickerServerOptions): Promise<PickerServer> {
  const creds = opts.tls
    ? ServerCredentials.createSsl(
        null,
        [{ cert_chain: readFileSync(opts.tls.certFile), private_key: readFileSync(opts.tls.keyFile) }],
        false,
      )
    : ServerCredentials.createInsecure();
  const server = new Server(SERVER_OPTIONS);
  allowDataPlaneResets(server);
  server.addService(extProcService(), { Process: (call: Stream) => serveStream(host, call) });
  const health = new HealthImplementation({ '': 'SERVING', liveness: 'SERVING' });
  let serving = true;
  const setReady = (): void => {
    const status = serving && opts.ready() ? 'SERVING' : 'NOT_SERVING';
    health.setStatus('readiness', status);
    health.setStatus(EXT_PROC_SERVICE, status);
  };
  setReady();
  const timer = setInterval(setReady, 1000).unref();
  const healthServer = new Server(SERVER_OPTIONS);
  health.addToServer(healthServer);
  const bind = (s: Server, port: number): Promise<number> =>
    new Promise((resolve, reject) =>
      s.bindAsync(`${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`, creds, (err, bound) =>
        err ? reject(err) : resolve(bound),
      ),
    );
  const port = await bind(server, opts.port);
  const healthPort = await bind(healthServer, opts.healthPort);
  return {
    port,
    healthPort,
    notServing() {
      serving = false;
      setReady();
    },
    async close() {
      clearInterval(timer);
      await Promise.all(
        [server, healthServer].map(
          (s) =>
            new Promise<void>((resolve) => {
              s.tryShutdown(() => resolve());
              // Streams Envoy keeps open for requests in flight end with the process, not after.
              setTimeout(() => {
                s.forceShutdown();
                resolve();
              }, 1000).unref();
            }),
        ),
      );
    },
  };
}

function serveStream(host: PickerHost, call: Stream): void {
  const exchange = new PickerExchange(host, newRequestId(), (r) => {
    if (!call.writableEnded && !call.destroyed) call.write(r);
  });
  // One message at a time, in order: a pick may wait (admission, wake) while later ones arrive.
  // A message is handled as it comes unless one waits (only a pick does); those that come
  // meanwhile queue behind it. No promise a message: they were a good part of a stream's garbage.
  const backlog: unknown[] = [];
  /** A message is being handled, or its pick waits: later ones queue (and nothing re-enters). */
  let busy = false;
  /** The stream ended or broke: the exchange ends after the last message was handled. */
  let over = false;
  const failed = (err: unknown): void => {
    host.log.warn({ err }, 'ext_proc: stream failed');
    failStream(call, err instanceof Error ? err.message : String(err));
  };
  const handle = (raw: unknown): Promise<void> | undefined => {
    const msg = readProcessingRequest(raw);
    if (!msg.success) {
      host.log.warn(
        { issue: msg.error.issues[0]?.message, path: msg.error.issues[0]?.path.join('.') },
        'ext_proc: a message the picker cannot read',
      );
      failStream(call, 'unreadable ProcessingRequest');
      return undefined;
    }
    return exchange.receive(msg.data);
  };
  const drain = (): void => {
    busy = true;
    while (backlog.length > 0) {
      let wait: Promise<void> | undefined;
      try {
        wait = handle(backlog.shift());
      } catch (err) {
        failed(err);
      }
      if (wait) {
        wait.then(drain, (err: unknown) => {
          failed(err);
          drain();
        });
        return;
      }
    }
    busy = false;
    if (over) exchange.end();
  };
  call.on('data', (raw: unknown) => {
    backlog.push(raw);
    if (!busy) drain();
  });
  const finish = (): void => {
    exchange.cancel();
    over = true;
    if (!busy) drain();
  };
  call.on('end', () => {
    finish();
    if (!call.writableEnded) call.end();
  });
  call.on('cancelled', finish);
  call.on('error', finish);
  call.on('close', finish);
}

/** Ends the stream with gRPC INTERNAL: Envoy answers the client per failure_mode_allow. */
function failStream(call: Stream, details: string): void {
  // grpc-js sends the status of an 'error' event's object (server-call.js serverErrorToStatus).
  call.emit('error', Object.assign(new Error(details), { code: status.INTERNAL, details }));
}
