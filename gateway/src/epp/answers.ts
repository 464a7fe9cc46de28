// The endpoint picker's answers to Envoy, as ProcessingResponse objects
// (ext_proc v3, field names as in the protos), in GIE's endpoint picker
// protocol: the pick in the `x-gateway-destination-endpoint` request header
// and in `envoy.lb` dynamic metadata; the body (salt stamped) streamed back in
// chunks, as FULL_DUPLEX_STREAMED requires; or an ImmediateResponse. Enums
// are numbers (protos.ts encodes answers without converting them).

/** GIE's names (docs/proposals/004-endpoint-picker-protocol). */
export const DESTINATION_HEADER = 'x-gateway-destination-endpoint';
export const DESTINATION_NAMESPACE = 'envoy.lb';
export const SUBSET_NAMESPACE = 'envoy.lb.subset_hint';
export const SUBSET_KEY = 'x-gateway-destination-endpoint-subset';
export const SERVED_KEY = 'x-gateway-destination-endpoint-served';

/** GIE's reference picker sends body chunks of at most this many bytes (pkg/common/envoy/chunking.go). */
export const BODY_CHUNK_BYTES = 62_000;

export type ProcessingResponse = Record<string, unknown>;

/**
 * HeaderValueOption.HeaderAppendAction OVERWRITE_IF_EXISTS_OR_ADD (envoy.config.core.v3): an
 * answer is encoded as built (protos.ts), so an enum is written as its number.
 */
export const OVERWRITE_IF_EXISTS_OR_ADD = 2;

/** A header the answer sets, replacing any of that name. */
export function headerOption(key: string, value: string): object {
  return { header: { key, raw_value: Buffer.from(value) }, append_action: OVERWRITE_IF_EXISTS_OR_ADD };
}

/**
 * The request headers' answer for a pick: the header carries the first endpoint only (an
 * ORIGINAL_DST cluster reads one address from it), the metadata the whole ordered list
 * (first, then the fallbacks), as GIE's data planes read it; `headers` are added too.
 */
export function buildPickHeaders(
  endpoints: readonly string[],
  headers: Readonly<Record<string, string>>,
  remove: readonly string[] = [],
): ProcessingResponse {
  const [first] = endpoints;
  if (first === undefined) throw new Error('a pick names at least one endpoint');
  const set = [
    headerOption(DESTINATION_HEADER, first),
    ...Object.entries(headers).map(([k, v]) => headerOption(k, v)),
  ];
  return {
    request_headers: {
      response: {
        clear_route_cache: true,
        // A header set is left out of the removals: each header has one fate.
        header_mutation: { set_headers: set, remove_headers: remove.filter((h) => !(h in headers)) },
      },
    },
    // Maps travel as their entries: protos loaded from descriptors keep map fields as repeated entries.
    dynamic_metadata: {
      fields: [
        {
          key: DESTINATION_NAMESPACE,
          value: {
            struct_value: {
              fields: [{ key: DESTINATION_HEADER, value: { string_value: endpoints.join(',') } }],
            },
          },
        },
      ],
    },
  };
}

/** The request body as sent upstream, in streamed chunks; the last one ends the stream. */
export function buildBodyChunks(body: Buffer, endOfStream = true): ProcessingResponse[] {
  const out: ProcessingResponse[] = [];
  for (let at = 0; at < body.length || out.length === 0; at += BODY_CHUNK_BYTES) {
    const chunk = body.subarray(at, at + BODY_CHUNK_BYTES);
    const last = at + BODY_CHUNK_BYTES >= body.length;
    out.push({
      request_body: {
        response: {
          body_mutation: { streamed_response: { body: chunk, end_of_stream: last && endOfStream } },
        },
      },
    });
  }
  return out;
}

/** A response body chunk passed on unchanged (FULL_DUPLEX_STREAMED wants every chunk answered). */
export function buildResponseChunk(body: Buffer, endOfStream: boolean): ProcessingResponse {
  return {
    response_body: {
      response: { body_mutation: { streamed_response: { body, end_of_stream: endOfStream } } },
    },
  };
}

/** Envoy answers the client itself: a refusal, an error or a stored answer. */
export function buildImmediate(
  status: number,
  headers: Readonly<Record<string, string>>,
  body: string,
  details: string,
): ProcessingResponse {
  return {
    immediate_response: {
      status: { code: status },
      headers: { set_headers: Object.entries(headers).map(([k, v]) => headerOption(k, v)) },
      body: Buffer.from(body),
      details,
    },
  };
}

/** Go on unchanged (response headers; trailers). */
export function buildContinue(
  phase: 'response_headers' | 'request_trailers' | 'response_trailers',
): ProcessingResponse {
  return phase === 'response_headers' ? { response_headers: { response: {} } } : { [phase]: {} };
}
