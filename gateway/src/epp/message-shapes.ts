// The shapes Envoy's ext_proc messages arrive in (several a request), read by
// hand with exactly the result messages.ts's zod schemas give them, at a small
// part of the cost: zod's object parsing allocated more per request than the
// rest of the picker's request path together (a sampling heap profile under
// the bench's overhead load). Anything else (a type the schema would refuse,
// a key it would strip) returns undefined and the caller takes the schema, so
// the schema stays the contract and names every error; messages.test.ts
// compares the two on Envoy's shapes and odd ones.

import { isObject } from '../tokenize/message-shapes.ts';
import type { HttpBody, HttpHeaders, MetadataContext, ProtoValue } from './messages.ts';

type Fields = Record<string, unknown>;

const HEADER_VALUE_KEYS: ReadonlySet<string> = new Set(['key', 'value', 'raw_value']);

/** A HeaderValue with no key the schema would strip: returned as is (no copy). */
function isHeaderValue(h: unknown): boolean {
  if (!isObject(h) || typeof h['key'] !== 'string') return false;
  const { value, raw_value } = h;
  if (value !== undefined && typeof value !== 'string') return false;
  if (raw_value !== undefined && !(raw_value instanceof Buffer)) return false;
  for (const k in h) if (!HEADER_VALUE_KEYS.has(k)) return false;
  return true;
}

/** `end_of_stream`: absent is false. */
function readFlag(v: unknown): boolean | undefined {
  return v === undefined ? false : typeof v === 'boolean' ? v : undefined;
}

export function readHeaders(v: unknown): HttpHeaders | undefined {
  if (!isObject(v)) return undefined;
  const end = readFlag(v['end_of_stream']);
  if (end === undefined) return undefined;
  const map = v['headers'];
  if (map === undefined) return { headers: { headers: [] }, end_of_stream: end };
  if (!isObject(map)) return undefined;
  const list = map['headers'];
  if (list === undefined) return { headers: { headers: [] }, end_of_stream: end };
  if (!Array.isArray(list) || !list.every(isHeaderValue)) return undefined;
  return { headers: { headers: list as HttpHeaders['headers']['headers'] }, end_of_stream: end };
}

const NO_BYTES = Buffer.alloc(0);

export function readBody(v: unknown): HttpBody | undefined {
  if (!isObject(v)) return undefined;
  const end = readFlag(v['end_of_stream']);
  const body = v['body'] === undefined ? NO_BYTES : v['body'];
  if (end === undefined || !(body instanceof Buffer)) return undefined;
  return { body, end_of_stream: end };
}

/** Trailers: any object, kept whole (a loose object). */
export function readLoose(v: unknown): Fields | undefined {
  return isObject(v) ? { ...v } : undefined;
}

/** google.protobuf.Value: a loose object whose string_value and list_value are checked. */
function readValue(v: unknown): ProtoValue | undefined {
  if (!isObject(v)) return undefined;
  const s = v['string_value'];
  if (s !== undefined && typeof s !== 'string') return undefined;
  const list = v['list_value'];
  if (list === undefined) return { ...v };
  if (!isObject(list)) return undefined;
  const raw = list['values'] ?? [];
  if (!Array.isArray(raw)) return undefined;
  const values: ProtoValue[] = [];
  for (const item of raw) {
    const read = readValue(item);
    if (read === undefined) return undefined;
    values.push(read);
  }
  return { ...v, list_value: { values } };
}

/** A proto map's repeated `{key, value}` entries as a record (absent: empty). */
function readMap<T>(entries: unknown, read: (v: unknown) => T | undefined): Record<string, T> | undefined {
  const out: Record<string, T> = {};
  if (entries === undefined) return out;
  if (!Array.isArray(entries)) return undefined;
  for (const e of entries) {
    if (!isObject(e) || typeof e['key'] !== 'string') return undefined;
    const value = read(e['value']);
    if (value === undefined) return undefined;
    out[e['key']] = value;
  }
  return out;
}

const readStruct = (v: unknown): { fields: Record<string, ProtoValue> } | undefined => {
  if (!isObject(v)) return undefined;
  const fields = readMap(v['fields'], readValue);
  return fields && { fields };
};

export function readMetadata(v: unknown): MetadataContext | undefined {
  if (!isObject(v)) return undefined;
  const namespaces = readMap(v['filter_metadata'], readStruct);
  return namespaces && { filter_metadata: namespaces };
}
