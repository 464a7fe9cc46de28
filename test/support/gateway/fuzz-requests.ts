// Requests a careless, confused or hostile client might send the gateway:
// any method, path, query and headers around a body from fuzz-bodies.ts, as
// fast-check arbitraries; describeCase() names one in a line.

import fc from 'fast-check';
import { bodySpec, type BodySpec, type RouteKind } from './fuzz-bodies.ts';

export const GENERATION_PATHS: Readonly<Record<RouteKind, string>> = {
  chat: '/v1/chat/completions',
  completion: '/v1/completions',
  generate: '/generate',
};
export const ADMIN_PATHS = ['/status', '/status.json', '/metrics', '/healthz', '/readyz'] as const;

export interface HttpCase {
  readonly method: string;
  /** Path and query, as sent. */
  readonly path: string;
  readonly headers: readonly (readonly [string, string])[];
  readonly body: BodySpec;
}

// --- paths and headers ---------------------------------------------------------

const segment = fc.stringMatching(/^[A-Za-z0-9._~%-]{0,12}$/);
const queryString = fc.oneof(
  { weight: 6, arbitrary: fc.constant('') },
  { weight: 3, arbitrary: fc.stringMatching(/^\?[A-Za-z0-9=&%._-]{0,60}$/) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(100, 5_000, 15_000, 17_000, 40_000)
      .map((n) => `?${'q='.concat('a'.repeat(n))}`),
  },
);

/** Where the case goes: its body's own route mostly, elsewhere sometimes. */
function pathFor(body: BodySpec): fc.Arbitrary<string> {
  const own = 'route' in body ? GENERATION_PATHS[body.route] : undefined;
  const known = [...Object.values(GENERATION_PATHS), '/v1/models', ...ADMIN_PATHS];
  return fc
    .oneof(
      { weight: own ? 12 : 0, arbitrary: fc.constant(own ?? '/') },
      { weight: 6, arbitrary: fc.constantFrom(...known) },
      {
        weight: 2,
        arbitrary: fc.oneof(
          fc.array(segment, { maxLength: 5 }).map((s) => `/${s.join('/')}`),
          fc.constantFrom(...known).map((p) => `${p}/`),
          fc.constantFrom(...known).map((p) => `/${p}`),
          fc.constantFrom(...known).map((p) => p.toUpperCase()),
          fc.constantFrom(...known).map((p) => `${p}%00`),
          fc.constant('/v1/../generate'),
          fc.constant('/v1/chat/completions;x=1'),
        ),
      },
    )
    .chain((p) => queryString.map((q) => p + q));
}

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'application/json;charset=UTF-16',
  'APPLICATION/JSON',
  'application/json, text/plain',
  'application/jsonx',
  'application/x-json',
  'application/problem+json',
  'text/plain',
  'text/event-stream',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/octet-stream',
  '',
  '*/*',
  ';;;',
];

const headerValue = fc.stringMatching(/^[\x20-\x7e]{0,40}$/);
const headerName = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/).filter((n) => !FORBIDDEN.has(n));
/** Headers the client library owns (framing): the raw-socket cases send those. */
const FORBIDDEN = new Set([
  'content-length',
  'transfer-encoding',
  'host',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'proxy-connection',
]);

const oneHeader: fc.Arbitrary<readonly (readonly [string, string])[]> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...CONTENT_TYPES).map((v) => [['content-type', v] as const]) },
  {
    weight: 3,
    arbitrary: fc
      .oneof(fc.constantFrom('m', 'nope', '', ' m', 'M'), headerValue)
      .map((v) => [['x-cacheroute-model', v] as const]),
  },
  {
    weight: 2,
    arbitrary: fc
      .oneof(fc.constantFrom('Bearer x', 'Bearer ', 'Basic Zm9vOmJhcg==', ''), headerValue)
      .map((v) => [['authorization', v] as const]),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('text/event-stream', 'application/json', '*/*', '')
      .map((v) => [['accept', v] as const]),
  },
  { weight: 2, arbitrary: fc.tuple(headerName, headerValue).map(([n, v]) => [[n, v] as const]) },
  {
    // The same header twice (node joins most with ", ", keeps the first content-type).
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom('content-type', 'x-cacheroute-model', 'authorization'), headerValue, headerValue)
      .map(([n, a, b]) => [[n, a] as const, [n, b] as const]),
  },
  {
    // Long headers, past Node's 16 KiB limit for the request line and headers sometimes: 431.
    weight: 1,
    arbitrary: fc.oneof(
      fc
        .constantFrom(1_000, 8_000, 17_000, 40_000)
        .map((n) => [['x-cacheroute-model', 'm'.repeat(n)] as const]),
      fc
        .integer({ min: 20, max: 200 })
        .map((n) => Array.from({ length: n }, (_, i) => [`x-h${i}`, 'v'.repeat(100)] as const)),
    ),
  },
);

export const httpCase: fc.Arbitrary<HttpCase> = bodySpec.chain((body) =>
  fc.record({
    method: fc.oneof(
      { weight: 12, arbitrary: fc.constant('POST') },
      { weight: 3, arbitrary: fc.constant('GET') },
      { weight: 2, arbitrary: fc.constantFrom('PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD') },
    ),
    path: pathFor(body),
    headers: fc
      .tuple(
        fc.oneof(
          { weight: 8, arbitrary: fc.constant('application/json') },
          { weight: 2, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
        ),
        fc.array(oneHeader, { maxLength: 3 }),
      )
      .map(([ct, extra]) => [['content-type', ct] as const, ...extra.flat()]),
    body: fc.constant(body),
  }),
);

/** One line describing a case (its size, not its bytes), for the log of a failure. */
export function describeCase(c: HttpCase): string {
  const b = c.body;
  const what =
    b.kind === 'huge' || b.kind === 'deep' || b.kind === 'many'
      ? JSON.stringify({ ...b })
      : JSON.stringify(b).slice(0, 300);
  const shown = c.headers.slice(0, 6).map(([n, v]) => `${n}: ${v.length > 60 ? `<${v.length} chars>` : v}`);
  const headers = c.headers.length > 6 ? [...shown, `+${c.headers.length - 6} more`] : shown;
  return `${c.method} ${c.path.length > 80 ? `${c.path.slice(0, 60)}...<${c.path.length}>` : c.path} [${headers.join('; ')}] ${what}`;
}
