import { describe, expect, it } from 'vitest';
import { ServerInfo } from '../../operator/src/sglang-client/identity.ts';
import { toEndpointEvents } from './publishers.ts';

// The block as SGLang 0.5.23 advertises it (runtime_context.describe_kv_events_publisher).
const advert = {
  publisher: 'zmq',
  endpoint_host: '*',
  endpoint_port_base: 5557,
  topic: 'kv',
  block_size: 16,
  dp_size: 2,
  replay_endpoint_port_base: 5559,
  load_endpoint_port_base: 5561,
  load_topic: 'load',
};

describe("/server_info's kv_events block", () => {
  it('becomes the ports and topics status publishes', () => {
    const info = ServerInfo.parse({ model_path: '/m', kv_events: advert });
    expect(info.kv_events && toEndpointEvents(info.kv_events)).toEqual({
      port: 5557,
      ranks: 2,
      topic: 'kv',
      blockSize: 16,
      replayPort: 5559,
      loadPort: 5561,
      loadTopic: 'load',
    });
  });

  it('without replay or load: only the KV stream; an empty topic subscribes to all', () => {
    const info = ServerInfo.parse({
      model_path: '/m',
      kv_events: { publisher: 'zmq', endpoint_port_base: 6000, block_size: 1, topic: '' },
    });
    expect(info.kv_events && toEndpointEvents(info.kv_events)).toEqual({
      port: 6000,
      ranks: 1,
      topic: '',
      blockSize: 1,
    });
  });

  it('an unreadable block costs the index, not the verification', () => {
    const info = ServerInfo.parse({ model_path: '/m', kv_events: { publisher: 'zmq', block_size: 0 } });
    expect(info.kv_events).toBeNull();
    expect(info.model_path).toBe('/m');
  });
});
