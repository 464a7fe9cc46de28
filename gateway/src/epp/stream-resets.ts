// How many stream resets a data plane may send the picker before Node ends the
// connection. Node's HTTP/2 server keeps nghttp2's rapid-reset guard
// (CVE-2023-44487): a token bucket of 1,000 RST_STREAMs, refilled at 33 a
// second, past which the whole connection gets GOAWAY(INTERNAL_ERROR). Envoy's
// ext_proc cancels its stream at the end of every request (RST_STREAM CANCEL,
// unless the runtime flag ext_proc_graceful_grpc_close is on, off by default in
// 1.40), so a gateway sending the picker more than 33 requests a second for
// half a minute trips it: the streams in flight on that connection die and
// Envoy answers their clients 500. The picker's only client is the data plane
// (the picker Service admits gateways only), whose cancels are one per request:
// the bucket is sized to requests, far above what one picker process serves.

import type { ServerOptions } from 'node:http2';
import type { Server } from '@grpc/grpc-js';

/** Resets a second a connection may carry for long: one per request, well past one picker's rate. */
export const STREAM_RESETS_PER_SECOND = 100_000;
/** Resets at once: a burst of requests ending together (a shed wave, a gateway's restart). */
export const STREAM_RESET_BURST = 1_000_000;

/**
 * Gives every HTTP/2 server `server` binds from now on the data plane's reset allowance.
 * grpc-js (1.14) exposes no option for it, but builds each of its HTTP/2 servers from its
 * `commonServerOptions` object (server.js createHttp2Server), which this extends; it fails
 * loudly if a grpc-js upgrade drops that object, rather than leaving the picker throttled.
 */
export function allowDataPlaneResets(server: Server): void {
  const common = (server as unknown as { commonServerOptions?: unknown }).commonServerOptions;
  if (typeof common !== 'object' || common === null)
    throw new Error(
      '@grpc/grpc-js no longer keeps commonServerOptions: set the HTTP/2 stream reset limits ' +
        '(streamResetBurst, streamResetRate) another way in gateway/src/epp/stream-resets.ts',
    );
  // Node applies the two only together (lib/internal/http2/util.js updateOptionsBuffer).
  Object.assign(common as ServerOptions, {
    streamResetBurst: STREAM_RESET_BURST,
    streamResetRate: STREAM_RESETS_PER_SECOND,
  } satisfies Pick<ServerOptions, 'streamResetBurst' | 'streamResetRate'>);
}
