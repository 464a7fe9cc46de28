import { describe, expect, it } from 'vitest';
import { ProcessingRequest, readMetadataList, readProcessingRequest } from './messages.ts';

const header = (key: string, value: string): object => ({ key, raw_value: Buffer.from(value) });

// Shapes as grpc-js hands them over (protos.ts: keepCase, oneofs, no defaults), captured from
// Envoy 1.40 asking about one POST: an empty metadata_context on every message but the last.
const ENVOY_MESSAGES: Record<string, unknown> = {
  requestHeaders: {
    request_headers: {
      headers: { headers: [header(':path', '/v1/chat/completions'), header(':method', 'POST')] },
    },
    request: 'request_headers',
    metadata_context: {},
    protocol_config: { request_body_mode: 'FULL_DUPLEX_STREAMED' },
  },
  bodyChunk: {
    request_body: { body: Buffer.from('{"a":1}') },
    request: 'request_body',
    metadata_context: {},
  },
  bodyEnd: { request_body: { end_of_stream: true }, request: 'request_body', metadata_context: {} },
  trailers: { request_trailers: {}, request: 'request_trailers' },
  responseHeaders: {
    response_headers: { headers: { headers: [header(':status', '200')] }, end_of_stream: true },
    request: 'response_headers',
    metadata_context: {
      filter_metadata: [
        {
          key: 'envoy.lb',
          value: {
            fields: [
              {
                key: 'x-gateway-destination-endpoint-served',
                value: { string_value: '10.0.0.1:8000', kind: 'string_value' },
              },
            ],
          },
        },
      ],
    },
  },
  subsetHint: {
    request_headers: { headers: { headers: [] } },
    request: 'request_headers',
    metadata_context: {
      filter_metadata: [
        {
          key: 'envoy.lb.subset_hint',
          value: {
            fields: [
              {
                key: 'x-gateway-destination-endpoint-subset',
                value: {
                  list_value: {
                    values: [{ string_value: '10.0.0.1:8000' }, { string_value: '10.0.0.2:8000' }],
                  },
                },
              },
            ],
          },
        },
      ],
    },
  },
  emptyHeaders: {
    request_headers: {},
    request: 'request_headers',
    metadata_context: { filter_metadata: [] },
  },
};

// What must still fail as the whole schema fails it, or read as the whole schema reads it.
const ODD_MESSAGES: Record<string, unknown> = {
  headerWithoutKey: {
    request_headers: { headers: { headers: [{ raw_value: Buffer.from('x') }] } },
    request: 'request_headers',
  },
  bodyNotBytes: { request_body: { body: 'text' }, request: 'request_body' },
  metadataNull: { request_body: {}, request: 'request_body', metadata_context: null },
  metadataString: { request_body: {}, request: 'request_body', metadata_context: 'x' },
  metadataBadEntry: {
    request_body: {},
    request: 'request_body',
    metadata_context: { filter_metadata: [{ key: 1 }] },
  },
  headerWithExtraKey: {
    request_headers: { headers: { headers: [{ key: 'a', raw_value: Buffer.from('x'), extra: 1 }] } },
    request: 'request_headers',
  },
  headerValueNotText: {
    request_headers: { headers: { headers: [{ key: 'a', value: 1 }] } },
    request: 'request_headers',
  },
  rawValueNotBytes: {
    request_headers: { headers: { headers: [{ key: 'a', raw_value: 'x' }] } },
    request: 'request_headers',
  },
  headerListNotList: { request_headers: { headers: { headers: {} } }, request: 'request_headers' },
  headerMapNotObject: { request_headers: { headers: 'x' }, request: 'request_headers' },
  endNotFlag: { request_body: { end_of_stream: 'yes' }, request: 'request_body' },
  trailersWithFields: { response_trailers: { trailers: { headers: [] } }, request: 'response_trailers' },
  metadataNotList: { request_body: {}, request: 'request_body', metadata_context: { filter_metadata: {} } },
  structWithoutFields: {
    request_body: {},
    request: 'request_body',
    metadata_context: { filter_metadata: [{ key: 'envoy.lb', value: {} }] },
  },
  structWithoutValue: {
    request_body: {},
    request: 'request_body',
    metadata_context: { filter_metadata: [{ key: 'envoy.lb' }] },
  },
  valuesNested: {
    request_body: {},
    request: 'request_body',
    metadata_context: {
      filter_metadata: [
        {
          key: 'n',
          value: {
            fields: [
              { key: 'empty', value: { list_value: {}, kind: 'list_value' } },
              {
                key: 'nested',
                value: { list_value: { values: [{ list_value: { values: [{ string_value: 'a' }] } }] } },
              },
              { key: 'other', value: { number_value: 1, kind: 'number_value' } },
            ],
          },
        },
      ],
    },
  },
  stringValueNotText: {
    request_body: {},
    request: 'request_body',
    metadata_context: {
      filter_metadata: [{ key: 'n', value: { fields: [{ key: 'k', value: { string_value: 1 } }] } }],
    },
  },
  listValueNotObject: {
    request_body: {},
    request: 'request_body',
    metadata_context: {
      filter_metadata: [{ key: 'n', value: { fields: [{ key: 'k', value: { list_value: [] } }] } }],
    },
  },
  namesAnotherMember: { request_body: {}, request: 'request_headers' },
  twoMembers: { request_body: {}, response_body: {}, request: 'request_body' },
  inheritedName: { request: 'toString' },
  noName: { response_trailers: {} },
  notAnObject: 'request_body',
};

describe('readProcessingRequest', () => {
  it.each(Object.entries({ ...ENVOY_MESSAGES, ...ODD_MESSAGES }))(
    'reads %s exactly as the whole schema does',
    (_, raw) => {
      const whole = ProcessingRequest.safeParse(raw);
      const read = readProcessingRequest(raw);
      expect(read.success).toBe(whole.success);
      expect(read.data).toEqual(whole.data);
    },
  );

  it("reads the metadata Envoy forwards: the served endpoint, the subset hint's list", () => {
    const served = readProcessingRequest(ENVOY_MESSAGES['responseHeaders']);
    const hint = readProcessingRequest(ENVOY_MESSAGES['subsetHint']);
    if (!served.success || !hint.success) throw new Error('unread');
    expect(readMetadataList(served.data, 'envoy.lb', 'x-gateway-destination-endpoint-served')).toEqual([
      '10.0.0.1:8000',
    ]);
    expect(
      readMetadataList(hint.data, 'envoy.lb.subset_hint', 'x-gateway-destination-endpoint-subset'),
    ).toEqual(['10.0.0.1:8000', '10.0.0.2:8000']);
  });
});
