// A request's id: a random UUID, as one flat string.
//
// node:crypto's randomUUID builds its string by concatenating 20 hex pairs and dashes, which V8
// keeps as a tree of cons strings (about 490 bytes, measured on Node 24) until something flattens
// it; hashing it as a Map key does not. The id outlives its request where the gateway keeps it
// (the KV index's book of expected outputs holds it until the answer's finishing store, or for
// seconds after), so that tree was copied by two scavenges and promoted, for every request.
// toLowerCase of a lower-case string returns the same text as one flat string (58 bytes).

import { randomUUID } from 'node:crypto';

export function newRequestId(): string {
  return randomUUID().toLowerCase();
}
