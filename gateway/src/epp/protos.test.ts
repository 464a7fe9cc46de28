import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  DESTINATION_NAMESPACE,
  SERVED_KEY,
  SUBSET_KEY,
  SUBSET_NAMESPACE,
  buildBodyChunks,
  buildContinue,
  buildImmediate,
  buildPickHeaders,
  buildResponseChunk,
  headerOption,
} from './answers.ts';
import { ProcessingRequest, readMetadataList, readProcessingRequest } from './messages.ts';
import { EXT_PROC_SERVICE, extProcService, loadProtos } from './protos.ts';

type Method = MethodDefinition<object, object>;
const direct = extProcService()['Process'] as Method;
/** What grpc-js did with the same messages through @grpc/proto-loader: the bytes and shapes to keep. */
const loader = (loadProtos()[EXT_PROC_SERVICE] as ServiceDefinition)['Process'] as Method;

const header = (key: string, value: string): object => ({ key, raw_value: Buffer.from(value) });

// Every answer the picker (exchange.ts) and the bench's floor send.
const ANSWERS: Record<string, object> = {
  pick: buildPickHeaders(['10.0.0.1:8000', '10.0.0.2:8000'], { authorization: 'Bearer k' }, [
    'authorization',
  ]),
  bodyChunks: buildBodyChunks(Buffer.alloc(130_000, 'a'), false),
  emptyBody: buildBodyChunks(Buffer.alloc(0))[0] ?? {},
  responseChunk: buildResponseChunk(Buffer.from('data: {}\n\n'), true),
  immediate: buildImmediate(
    429,
    { 'retry-after': '1', 'content-type': 'application/json' },
    '{}',
    'cacheroute_x',
  ),
  continueHeaders: buildContinue('response_headers'),
  continueRequestTrailers: buildContinue('request_trailers'),
  continueResponseTrailers: buildContinue('response_trailers'),
  clientHeaders: {
    response_headers: {
      response: { header_mutation: { set_headers: [headerOption('x-cacheroute-endpoint', 'a')] } },
    },
  },
};

// Messages as Envoy 1.40 sends them (messages.test.ts has them as proto-loader handed them over).
const ENVOY_MESSAGES: Record<string, object> = {
  requestHeaders: {
    request_headers: {
      headers: { headers: [header(':path', '/v1/chat/completions'), header(':method', 'POST')] },
    },
    metadata_context: {},
    protocol_config: { request_body_mode: 'FULL_DUPLEX_STREAMED' },
  },
  bodyChunk: { request_body: { body: Buffer.from('{"a":1}') }, metadata_context: {} },
  bodyEnd: { request_body: { end_of_stream: true }, metadata_context: {} },
  trailers: { request_trailers: {} },
  responseHeaders: {
    response_headers: { headers: { headers: [header(':status', '200')] }, end_of_stream: true },
    metadata_context: {
      filter_metadata: [
        {
          key: 'envoy.lb',
          value: {
            fields: [
              { key: 'x-gateway-destination-endpoint-served', value: { string_value: '10.0.0.1:8000' } },
            ],
          },
        },
      ],
    },
  },
  subsetHint: {
    request_headers: { headers: { headers: [] } },
    metadata_context: {
      filter_metadata: [
        {
          key: 'envoy.lb.subset_hint',
          value: {
            fields: [
              {
                key: 'x-gateway-destination-endpoint-subset',
                value: { list_value: { values: [{ string_value: '10.0.0.1:8000' }, { number_value: 1 }] } },
              },
            ],
          },
        },
      ],
    },
  },
  responseBody: { response_body: { body: Buffer.from('data: {}\n\n'), end_of_stream: false } },
  responseTrailers: { response_trailers: { trailers: { headers: [header('grpc-status', '0')] } } },
};

/** What the picker reads of a message (exchange.ts): the oneof's member, the served endpoint, the subset hint. */
function readByPicker(raw: unknown): unknown {
  const read = readProcessingRequest(raw);
  if (!read.success) return read.error;
  const m = read.data;
  return {
    request_headers: m.request_headers,
    request_body: m.request_body,
    request_trailers: m.request_trailers,
    response_headers: m.response_headers,
    response_body: m.response_body,
    response_trailers: m.response_trailers,
    served: readMetadataList(m, DESTINATION_NAMESPACE, SERVED_KEY),
    subset: readMetadataList(m, SUBSET_NAMESPACE, SUBSET_KEY),
  };
}

afterEach(() => vi.restoreAllMocks());

describe('the ext_proc service on protobufjs directly', () => {
  it.each(Object.entries(ANSWERS))(
    'encodes the answer %s to the bytes proto-loader gave Envoy',
    (_, answer) => {
      const messages = Array.isArray(answer) ? answer : [answer];
      for (const m of messages as object[])
        expect(direct.responseSerialize(m).equals(loader.responseSerialize(m))).toBe(true);
    },
  );

  it.each(Object.entries(ENVOY_MESSAGES))(
    "decodes Envoy's %s into what the picker read from proto-loader's objects, by hand",
    (_, msg) => {
      const bytes = loader.requestSerialize(msg);
      const before = readByPicker(loader.requestDeserialize(bytes));
      const schema = vi.spyOn(ProcessingRequest, 'safeParse');
      expect(readByPicker(direct.requestDeserialize(bytes))).toEqual(before);
      // The hand reading took it (message-shapes.ts), not the schema's slower whole parse.
      expect(schema).not.toHaveBeenCalled();
    },
  );

  it('names the oneof member present and leaves absent fields absent, as proto-loader did', () => {
    const bytes = loader.requestSerialize(ENVOY_MESSAGES['bodyEnd'] ?? {});
    const msg = direct.requestDeserialize(bytes) as Record<string, unknown>;
    expect(msg['request']).toBe('request_body');
    expect(msg['request_headers']).toBeUndefined();
    expect(msg['request_body']).toEqual({ end_of_stream: true });
    expect((msg['request_body'] as Record<string, unknown>)['body']).toBeUndefined();
    const own: string[] = [];
    for (const key in msg) own.push(key);
    expect(own.sort()).toEqual(['metadata_context', 'request_body']);
  });

  it('keeps bytes as Buffers', () => {
    const bytes = loader.requestSerialize(ENVOY_MESSAGES['bodyChunk'] ?? {});
    const msg = direct.requestDeserialize(bytes) as { request_body: { body: unknown } };
    expect(msg.request_body.body).toBeInstanceOf(Buffer);
    expect(String(msg.request_body.body)).toBe('{"a":1}');
  });
});
