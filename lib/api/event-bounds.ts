// What a runtime reported about its event publishers, held to what its
// Deployment declared. The numbers in status.endpoints[].events come from the
// runtime's own /server_info (the operator copies them): a runtime image is
// the namespace user's, so a lie there must not cost the gateway more than
// the Deployment's spec allows (a dp_size of 2^32 made the rebuild build an
// address a rank and throw, on every gateway replica). Pure.

import type { EndpointEvents } from './index.ts';

const MAX_PORT = 65_535;
/** SGLang's page sizes are tens of tokens; a block of more than this is not a page. */
export const MAX_BLOCK_SIZE = 65_536;
/** A topic is a short word ("kv"); it is sent back to the runtime in every subscription. */
export const MAX_TOPIC_BYTES = 256;

/**
 * Why `ev` is out of the bounds `declaredRanks` (spec.parallelism.data) sets, in words for
 * /status; undefined when it is within them.
 */
export function checkEndpointEvents(ev: EndpointEvents, declaredRanks: number): string | undefined {
  if (!Number.isSafeInteger(ev.ranks) || ev.ranks < 1 || ev.ranks > declaredRanks)
    return `reports ${ev.ranks} data-parallel ranks; its spec declares ${declaredRanks} (parallelism.data)`;
  const ports: [string, number | undefined][] = [
    ['port', ev.port],
    ['replayPort', ev.replayPort],
    ['loadPort', ev.loadPort],
  ];
  for (const [field, base] of ports) {
    if (base === undefined) continue;
    if (!Number.isSafeInteger(base) || base < 1 || base + ev.ranks - 1 > MAX_PORT)
      return `reports events ${field} ${base} for ${ev.ranks} ranks: ports must lie within 1..${MAX_PORT}`;
  }
  if (!Number.isSafeInteger(ev.blockSize) || ev.blockSize < 1 || ev.blockSize > MAX_BLOCK_SIZE)
    return `reports a block size of ${ev.blockSize} tokens; 1..${MAX_BLOCK_SIZE} is accepted`;
  for (const topic of [ev.topic, ev.loadTopic ?? ''])
    if (Buffer.byteLength(topic) > MAX_TOPIC_BYTES)
      return `reports an event topic longer than ${MAX_TOPIC_BYTES} bytes`;
  return undefined;
}
