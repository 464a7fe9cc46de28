import { describe, expect, it } from 'vitest';
import { buildEndpointUrl } from './endpoint-url.ts';

describe('buildEndpointUrl', () => {
  it('brackets an IPv6 pod IP, as a URL needs', () => {
    expect(buildEndpointUrl('10.244.0.5', 30000)).toBe('http://10.244.0.5:30000');
    expect(buildEndpointUrl('fd00:10:244::5', 30000)).toBe('http://[fd00:10:244::5]:30000');
    expect(new URL(buildEndpointUrl('fd00:10:244::5', 30000)).port).toBe('30000');
  });
});
