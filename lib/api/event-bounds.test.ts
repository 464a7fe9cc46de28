import { describe, expect, it } from 'vitest';
import { checkEndpointEvents } from './event-bounds.ts';

const ev = { port: 5557, ranks: 2, topic: 'kv', blockSize: 16 };

describe('checkEndpointEvents', () => {
  it('accepts what the spec declares', () => {
    expect(checkEndpointEvents(ev, 2)).toBeUndefined();
  });
  it('refuses more ranks than parallelism.data, and none', () => {
    expect(checkEndpointEvents(ev, 1)).toContain('reports 2 data-parallel ranks; its spec declares 1');
    expect(checkEndpointEvents({ ...ev, ranks: 0 }, 1)).toContain('reports 0 data-parallel ranks');
  });
  it('refuses a port range past 65535', () => {
    expect(checkEndpointEvents({ ...ev, loadPort: 65_535 }, 2)).toContain('loadPort 65535 for 2 ranks');
  });
  it('refuses a block size or a topic no runtime has', () => {
    expect(checkEndpointEvents({ ...ev, blockSize: 1 << 30 }, 2)).toContain('block size');
    expect(checkEndpointEvents({ ...ev, topic: 'k'.repeat(300) }, 2)).toContain('topic');
  });
});
