// What the endpoint picker reads of Envoy's ProcessingRequest (ext_proc v3),
// checked with zod as it arrives: the request's headers and body chunks, the
// response's headers, and the metadata Envoy forwards (GIE's subset hint, the
// served endpoint). Fields are named as in the protos (protos.ts).
// The schema is the contract; readProcessingRequest reads the shapes Envoy
// sends by hand with the schema's own result (message-shapes.ts).

import { z } from 'zod';
import { readBody, readHeaders, readLoose, readMetadata } from './message-shapes.ts';

const HeaderValue = z.object({
  key: z.string(),
  value: z.string().optional(),
  raw_value: z.instanceof(Buffer).optional(),
});

const HttpHeaders = z.object({
  headers: z.object({ headers: z.array(HeaderValue).default([]) }).default({ headers: [] }),
  end_of_stream: z.boolean().default(false),
});

const HttpBody = z.object({
  body: z.instanceof(Buffer).default(Buffer.alloc(0)),
  end_of_stream: z.boolean().default(false),
});

/** google.protobuf.Value as decoded (protos.ts): the members read here; others pass. */
const StructValue: z.ZodType<ProtoValue> = z.lazy(() =>
  z.looseObject({
    string_value: z.string().optional(),
    list_value: z.object({ values: z.array(StructValue).default([]) }).optional(),
  }),
);
export interface ProtoValue {
  readonly string_value?: string | undefined;
  readonly list_value?: { readonly values: readonly ProtoValue[] } | undefined;
}
/**
 * A proto map as it arrives: protos loaded from descriptors (protos.ts) keep map fields as
 * their repeated entries, `{key, value}`; read as a record.
 */
function protoMap<T>(value: z.ZodType<T>): z.ZodType<Record<string, T>, unknown> {
  return z
    .array(z.object({ key: z.string(), value }))
    .default([])
    .transform((entries) => {
      const out: Record<string, T> = {};
      for (const e of entries) out[e.key] = e.value;
      return out;
    });
}

const ProtoStruct = z.object({ fields: protoMap(StructValue) });

export const ProcessingRequest = z.looseObject({
  request_headers: HttpHeaders.optional(),
  request_body: HttpBody.optional(),
  request_trailers: z.looseObject({}).optional(),
  response_headers: HttpHeaders.optional(),
  response_body: HttpBody.optional(),
  response_trailers: z.looseObject({}).optional(),
  metadata_context: z.object({ filter_metadata: protoMap(ProtoStruct) }).optional(),
});
export type ProcessingRequest = z.infer<typeof ProcessingRequest>;
export type HttpHeaders = z.infer<typeof HttpHeaders>;
export type HttpBody = z.infer<typeof HttpBody>;
export type MetadataContext = NonNullable<ProcessingRequest['metadata_context']>;

/** The oneof `request`'s members, each read as its schema reads it (message-shapes.ts). */
const BRANCHES = {
  request_headers: readHeaders,
  request_body: readBody,
  request_trailers: readLoose,
  response_headers: readHeaders,
  response_body: readBody,
  response_trailers: readLoose,
} as const;
type Branch = keyof typeof BRANCHES;
const BRANCH_NAMES = Object.keys(BRANCHES) as Branch[];

/**
 * A ProcessingRequest as it arrives, with the result `ProcessingRequest` (the schema) gives it,
 * at a small part of the cost (several messages a request): the oneof member the message names
 * (`request`, the decoded oneof's name) and the metadata are read by hand (message-shapes.ts);
 * a message in any other shape, or one the hand reading would not take, goes to the schema.
 */
export function readProcessingRequest(raw: unknown): z.ZodSafeParseResult<ProcessingRequest> {
  const fast = readNamedBranch(raw);
  return fast ?? ProcessingRequest.safeParse(raw);
}

function readNamedBranch(raw: unknown): z.ZodSafeParseResult<ProcessingRequest> | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const msg = raw as Record<string, unknown>;
  const name = msg['request'];
  if (typeof name !== 'string' || !Object.hasOwn(BRANCHES, name)) return undefined;
  const branch = name as Branch;
  // One member present, the one named: what protobuf decoding of the oneof always gives.
  for (const other of BRANCH_NAMES) if (other !== branch && msg[other] !== undefined) return undefined;
  const member = BRANCHES[branch](msg[branch]);
  if (member === undefined) return undefined; // the schema's error names the path
  const out: Record<string, unknown> = { ...msg, [branch]: member };
  const metadata = msg['metadata_context'];
  if (metadata !== undefined) {
    const read = readMetadata(metadata);
    if (read === undefined) return undefined;
    out['metadata_context'] = read;
  }
  return { success: true, data: out };
}

/** Headers as the proxy reads them: lower-case names, repeated names joined by ', '. */
export function toHeaderRecord(h: HttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { key, value, raw_value } of h.headers.headers) {
    const name = key.toLowerCase();
    const v = raw_value && raw_value.length > 0 ? raw_value.toString('utf8') : (value ?? '');
    out[name] = name in out ? `${out[name]}, ${v}` : v;
  }
  return out;
}

/**
 * The strings at `namespace` → `key` in the forwarded metadata: a list value's strings, or a
 * comma-separated string's parts; undefined when absent.
 */
export function readMetadataList(
  req: ProcessingRequest,
  namespace: string,
  key: string,
): string[] | undefined {
  const value = req.metadata_context?.filter_metadata[namespace]?.fields[key];
  if (!value) return undefined;
  if (value.list_value) return value.list_value.values.flatMap((v) => splitList(v.string_value ?? ''));
  return splitList(value.string_value ?? '');
}

function splitList(s: string): string[] {
  return s
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
}
