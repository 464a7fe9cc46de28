import { describe, expect, it } from 'vitest';
import {
  MISSING_LB_METADATA,
  MISSING_SERVED_METADATA,
  readServedResult,
  readTestSelection,
} from './conformance-hooks.ts';
import { ProcessingRequest } from './messages.ts';

describe('readTestSelection (lwepp: request.go)', () => {
  it('a bare address admits its every port, ip:port that port only; absent or empty: no selection', () => {
    const admits = readTestSelection({
      'test-epp-endpoint-selection': '10.0.0.1, 10.0.0.2:3002,[fd00::3]:80',
    });
    expect(
      [
        '10.0.0.1:3000',
        '10.0.0.1:3004',
        '10.0.0.2:3002',
        '10.0.0.2:3000',
        '[fd00::3]:80',
        '10.0.0.3:3000',
      ].map((a) => admits?.(a)),
    ).toEqual([true, true, true, false, true, false]);
    expect(readTestSelection({ 'test-epp-endpoint-selection': 'fd00::4' })?.('[fd00::4]:30000')).toBe(true);
    expect(readTestSelection({})).toBeUndefined();
    expect(readTestSelection({ 'test-epp-endpoint-selection': '' })).toBeUndefined();
  });
});

describe('readServedResult (lwepp: response.go)', () => {
  const withLb = (fields: object[] | undefined): ProcessingRequest =>
    ProcessingRequest.parse({
      response_headers: {},
      ...(fields ? { metadata_context: { filter_metadata: [{ key: 'envoy.lb', value: { fields } }] } } : {}),
    });

  it('the served endpoint the data plane wrote, else what is missing', () => {
    const served = { key: 'x-gateway-destination-endpoint-served', value: { string_value: '10.0.0.1:3000' } };
    expect(readServedResult(withLb([served]))).toBe('10.0.0.1:3000');
    expect(readServedResult(withLb([]))).toBe(MISSING_SERVED_METADATA);
    expect(readServedResult(withLb(undefined))).toBe(MISSING_LB_METADATA);
  });
});
