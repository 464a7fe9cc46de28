// HTTP/1.1 requests broken below the level an HTTP client lets you reach: the
// request line, header syntax, message framing. As fast-check arbitraries of
// small descriptions; renderRaw() writes the bytes.

import fc from 'fast-check';

export type Framing =
  | 'content-length'
  | 'content-length-short'
  | 'content-length-long'
  | 'content-length-negative'
  | 'content-length-nan'
  | 'content-length-twice'
  | 'chunked'
  | 'chunked-bad-size'
  | 'chunked-and-content-length'
  | 'transfer-encoding-gzip'
  | 'none';

export interface RawCase {
  readonly method: string;
  readonly target: string;
  readonly version: string;
  readonly headerLines: readonly string[];
  readonly framing: Framing;
  readonly body: string;
  readonly eol: '\r\n' | '\n';
}

/** Whether the server has all it needs to answer (else it may wait for bytes that never come). */
export function isComplete(c: RawCase): boolean {
  return c.framing !== 'content-length-long';
}

const VALID_BODY = JSON.stringify({ model: 'm', prompt: 'Once upon a time', max_tokens: 2 });

export const rawCase: fc.Arbitrary<RawCase> = fc.record({
  method: fc.oneof(
    { weight: 6, arbitrary: fc.constant('POST') },
    {
      weight: 2,
      arbitrary: fc.constantFrom('GET', 'PRI', 'CONNECT', 'TRACE', 'P@ST', 'post', '', 'POST POST'),
    },
  ),
  target: fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom('/v1/completions', '/generate', '/v1/chat/completions') },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        '*',
        'http://gateway/v1/completions',
        '/a b',
        '/caf\u00e9',
        '',
        '/v1/completions?\u0001',
        '//v1/completions',
        `/v1/completions?${'a'.repeat(20_000)}`,
        `/${'x/'.repeat(4_000)}`,
      ),
    },
  ),
  version: fc.oneof(
    { weight: 6, arbitrary: fc.constant('HTTP/1.1') },
    {
      weight: 2,
      arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1x', 'HTTP/9.9', '', 'http/1.1'),
    },
  ),
  headerLines: fc.array(
    fc.constantFrom(
      'X-Bad\u0000: 1',
      'X-Bad: a\u0001b',
      'Bad Name: x',
      'no-colon',
      ' folded-continuation',
      'X-Latin: caf\u00e9',
      'Expect: 100-continue',
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Connection: keep-alive',
      'X-Cacheroute-Model: m',
      'Content-Type: text/plain',
      'Content-Type:',
      `X-Big: ${'b'.repeat(20_000)}`,
    ),
    { maxLength: 3 },
  ),
  framing: fc.constantFrom<Framing>(
    'content-length',
    'content-length',
    'content-length-short',
    'content-length-long',
    'content-length-negative',
    'content-length-nan',
    'content-length-twice',
    'chunked',
    'chunked-bad-size',
    'chunked-and-content-length',
    'transfer-encoding-gzip',
    'none',
  ),
  body: fc.oneof(fc.constant(VALID_BODY), fc.string({ maxLength: 60 })),
  eol: fc.constantFrom<'\r\n' | '\n'>('\r\n', '\r\n', '\n'),
});

function framingLines(f: Framing, length: number): string[] {
  switch (f) {
    case 'content-length':
      return [`Content-Length: ${length}`];
    case 'content-length-short':
      return [`Content-Length: ${Math.max(0, length - 3)}`];
    case 'content-length-long':
      return [`Content-Length: ${length + 10}`];
    case 'content-length-negative':
      return ['Content-Length: -1'];
    case 'content-length-nan':
      return ['Content-Length: 12abc'];
    case 'content-length-twice':
      return [`Content-Length: ${length}`, `Content-Length: ${length + 1}`];
    case 'chunked':
    case 'chunked-bad-size':
      return ['Transfer-Encoding: chunked'];
    case 'chunked-and-content-length':
      return ['Transfer-Encoding: chunked', `Content-Length: ${length}`];
    case 'transfer-encoding-gzip':
      return ['Transfer-Encoding: gzip'];
    case 'none':
      return [];
  }
}

/** The request's bytes (latin1: a character is a byte, so control and high bytes go out as given). */
export function renderRaw(c: RawCase): Buffer {
  const body = Buffer.from(c.body, 'utf8');
  const payload =
    c.framing === 'chunked' || c.framing === 'chunked-and-content-length'
      ? `${body.length.toString(16)}\r\n${body.toString('latin1')}\r\n0\r\n\r\n`
      : c.framing === 'chunked-bad-size'
        ? `zz\r\n${body.toString('latin1')}\r\n0\r\n\r\n`
        : body.toString('latin1');
  const head = [
    `${c.method} ${c.target} ${c.version}`.trim(),
    'Host: gateway',
    'Content-Type: application/json',
    'Connection: close',
    ...c.headerLines,
    ...framingLines(c.framing, body.length),
  ];
  return Buffer.from(`${head.join(c.eol)}${c.eol}${c.eol}${payload}`, 'latin1');
}

export function describeRaw(c: RawCase): string {
  const short = (s: string): string => (s.length > 60 ? `${s.slice(0, 40)}...<${s.length}>` : s);
  return JSON.stringify({
    ...c,
    target: short(c.target),
    headerLines: c.headerLines.map(short),
    body: short(c.body),
  });
}
