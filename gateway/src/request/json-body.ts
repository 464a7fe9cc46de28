// The JSON body parser, with bounds on the shape of what it builds. The body
// limit bounds bytes, not memory: 60 MiB of `[{},{},...]` parses into 20 million
// objects (gigabytes of heap, seconds of CPU), and nesting thousands deep parses
// fine but overflows the stack of every recursive walk after it (serialising the
// request for the runtime, the reuse key). The text is scanned first, in one pass
// that allocates nothing, and refused before JSON.parse when it is out of bounds.

import type { FastifyInstance } from 'fastify';
import { GatewayError } from '../errors/index.ts';

export interface JsonShapeLimits {
  /** Containers open at once. Real requests (tool schemas included) nest tens deep; Python's json takes about 1,000. */
  readonly maxDepth: number;
  /** Objects and arrays. Each costs tens of bytes once parsed however few it took in the text. */
  readonly maxContainers: number;
  /** Values, counted as separators plus containers: a prompt of token ids is one value a token. */
  readonly maxValues: number;
}

export const DEFAULT_JSON_SHAPE_LIMITS: JsonShapeLimits = {
  maxDepth: 512,
  maxContainers: 100_000,
  maxValues: 8_388_608,
};

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;

/**
 * The first bound `text` exceeds, in words for the client; undefined within bounds.
 * Only structure is read (strings are skipped): malformed text is left to JSON.parse.
 */
export function checkJsonShape(
  text: string,
  limits: JsonShapeLimits = DEFAULT_JSON_SHAPE_LIMITS,
): string | undefined {
  let depth = 0;
  let containers = 0;
  let separators = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) i = closingQuote(text, i);
    else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limits.maxDepth) return `JSON nested deeper than ${limits.maxDepth} levels`;
      if (++containers > limits.maxContainers)
        return `more than ${limits.maxContainers} JSON objects and arrays`;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--;
    else if (c === COMMA && ++separators + containers > limits.maxValues)
      return `more than ${limits.maxValues} JSON values`;
  }
  return undefined;
}

/** The index of the quote that closes the string opened at `open` (text.length if none). */
function closingQuote(text: string, open: number): number {
  // indexOf runs natively, several times faster than a loop over characters here.
  for (let q = text.indexOf('"', open + 1); q >= 0; q = text.indexOf('"', q + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(q - 1 - backslashes) === BACKSLASH) backslashes++;
    // An odd run of backslashes escapes the quote; an even run is escaped backslashes.
    if (backslashes % 2 === 0) return q;
  }
  return text.length;
}

/**
 * Replaces fastify's application/json parser by the same parser (secure-json-parse,
 * prototype poisoning refused) behind checkJsonShape: a body out of bounds is a 400
 * GW_BAD_REQUEST before anything is built from it.
 */
export function registerJsonBodyParser(
  app: FastifyInstance,
  limits: JsonShapeLimits = DEFAULT_JSON_SHAPE_LIMITS,
): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    // parseAs 'string': fastify hands a string (the union type covers parseAs 'buffer').
    const text = body as string;
    const problem = checkJsonShape(text, limits);
    if (problem) {
      done(new GatewayError('GW_BAD_REQUEST', { detail: `body: ${problem}` }), undefined);
      return;
    }
    void parse(req, text, done);
  });
}
