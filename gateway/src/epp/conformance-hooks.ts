// GIE's conformance test hooks, as its reference picker has them (lwepp v1.6.2,
// pkg/lwepp/handlers/request.go and response.go; pkg/lwepp/README.md), so the
// suite's checks can run against this picker. Only with
// `--picker-conformance-hooks` (off by default, never in the chart): with them a
// client chooses its own endpoint, which in production is the picker's to do.
//
// - Request header `test-epp-endpoint-selection: a[,b...]`: the candidates are
//   those endpoints only (`ip` any port of that address, `ip:port` that one);
//   it wins over the data plane's subset hint, as lwepp's does. None of them
//   known: no candidate, 503 (lwepp ends the stream, Envoy's 500).
// - Response header `x-conformance-test-served-endpoint`: the endpoint the data
//   plane says served the request (response-path `envoy.lb` metadata,
//   `x-gateway-destination-endpoint-served`), or lwepp's `fail: ...` text.
// - Request header `X-Echo-Set-Header: x-conformance-test-served-endpoint:<pick>`
//   for the suite's echo server, which repeats it in its answer.

import { DESTINATION_NAMESPACE, SERVED_KEY } from './answers.ts';
import type { ProcessingRequest } from './messages.ts';

export const TEST_SELECTION_HEADER = 'test-epp-endpoint-selection';
export const SERVED_RESULT_HEADER = 'x-conformance-test-served-endpoint';
export const ECHO_SET_HEADER = 'x-echo-set-header';

/** lwepp's texts when the data plane reports no served endpoint. */
export const MISSING_LB_METADATA = 'fail: missing envoy lb metadata';
export const MISSING_SERVED_METADATA = 'fail: missing destination endpoint served metadata';

/** `ip:port`, `[v6]:port`, or a bare address: its host (no brackets) and port, if any. */
function splitHostPort(token: string): { host: string; port?: string } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(token);
  if (bracketed) return { host: bracketed[1] ?? '', ...(bracketed[2] ? { port: bracketed[2] } : {}) };
  const v4 = /^([^:]+):(\d+)$/.exec(token);
  if (v4) return { host: v4[1] ?? '', port: v4[2] ?? '' };
  return { host: token };
}

/**
 * The test's endpoint selection as a predicate over endpoints' `ip:port` addresses; undefined
 * when the request names none (absent or empty header).
 */
export function readTestSelection(
  headers: Readonly<Record<string, string>>,
): ((address: string) => boolean) | undefined {
  const value = headers[TEST_SELECTION_HEADER];
  if (!value) return undefined;
  const anyPort = new Set<string>();
  const exact = new Set<string>();
  for (const raw of value.split(',')) {
    const token = raw.trim();
    if (token === '') continue;
    const { host, port } = splitHostPort(token);
    if (port === undefined) anyPort.add(host);
    else exact.add(`${host}:${port}`);
  }
  return (address) => {
    const { host, port } = splitHostPort(address);
    return anyPort.has(host) || (port !== undefined && exact.has(`${host}:${port}`));
  };
}

/** What lwepp writes into `x-conformance-test-served-endpoint` for this response-headers message. */
export function readServedResult(msg: ProcessingRequest): string {
  const lb = msg.metadata_context?.filter_metadata[DESTINATION_NAMESPACE];
  if (!lb) return MISSING_LB_METADATA;
  const served = lb.fields[SERVED_KEY]?.string_value;
  return served === undefined ? MISSING_SERVED_METADATA : served;
}

/** The header lwepp sends upstream with the pick, for the suite's echo server. */
export function buildEchoRequest(pick: string): Record<string, string> {
  return { [ECHO_SET_HEADER]: `${SERVED_RESULT_HEADER}:${pick}` };
}
