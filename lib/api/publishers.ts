// Where a runtime's event publishers listen, as its `/server_info` advertises
// them under `kv_events` (SGLang 0.5.23 runtime_context.describe_kv_events_publisher):
// a port base per stream (rank r listens on base + r), the page size blocks are
// hashed at, and the topics. The host is a wildcard ("*"): subscribers dial the
// pod's own IP, so status publishes ports and the gateway joins them to the IP.

import { z } from 'zod';
import type { EndpointEvents } from './index.ts';

export const KvEventsAdvert = z.looseObject({
  publisher: z.string(),
  endpoint_port_base: z.number().int().min(1).max(65535),
  topic: z.string().nullish(),
  block_size: z.number().int().positive(),
  dp_size: z.number().int().positive().nullish(),
  replay_endpoint_port_base: z.number().int().min(1).max(65535).nullish(),
  load_endpoint_port_base: z.number().int().min(1).max(65535).nullish(),
  load_topic: z.string().nullish(),
});
export type KvEventsAdvert = z.infer<typeof KvEventsAdvert>;

/** The advert in the shape Deployment status publishes; undefined for a publisher other than zmq. */
export function toEndpointEvents(advert: KvEventsAdvert): EndpointEvents | undefined {
  if (advert.publisher !== 'zmq') return undefined;
  return {
    port: advert.endpoint_port_base,
    ranks: advert.dp_size ?? 1,
    topic: advert.topic ?? '',
    blockSize: advert.block_size,
    ...(advert.replay_endpoint_port_base ? { replayPort: advert.replay_endpoint_port_base } : {}),
    ...(advert.load_endpoint_port_base
      ? { loadPort: advert.load_endpoint_port_base, loadTopic: advert.load_topic ?? 'load' }
      : {}),
  };
}
