import { describe, expect, it } from 'vitest';
import { checkHostPath } from './host-path-roots.ts';

const NODE_ROOT = '/var/lib/cacheroute/models';

describe('checkHostPath', () => {
  it('admits a path under a root, staged beside the node caches', () => {
    expect(checkHostPath('/var/lib/cacheroute/models/staged/llama', [NODE_ROOT], NODE_ROOT)).toEqual({
      ok: true,
    });
    expect(checkHostPath('/data/models/llama/', ['/data/models', NODE_ROOT], NODE_ROOT)).toEqual({
      ok: true,
    });
  });

  it('refuses what is outside every root, naming the flag and the roots', () => {
    for (const path of ['/', '/etc', '/var/lib/cacheroute/models2/x', '/var/lib']) {
      const v = checkHostPath(path, [NODE_ROOT], NODE_ROOT);
      expect(v).toEqual({ ok: false, message: expect.stringContaining('outside') });
      expect(!v.ok && v.message).toContain(`--host-path-roots: ${NODE_ROOT}`);
    }
    expect(checkHostPath('/data/x', [], NODE_ROOT)).toEqual({
      ok: false,
      message: expect.stringContaining('--host-path-roots: none'),
    });
  });

  it('refuses a path that climbs out of a root or is not written plainly', () => {
    for (const path of [`${NODE_ROOT}/../../../etc`, `${NODE_ROOT}/./x`, `${NODE_ROOT}//x`])
      expect(checkHostPath(path, [NODE_ROOT], NODE_ROOT)).toEqual({
        ok: false,
        message: expect.stringContaining('not a plain absolute path'),
      });
  });

  it('keeps the node caches and their verification records the operator’s', () => {
    for (const path of [
      NODE_ROOT,
      `${NODE_ROOT}/`,
      `${NODE_ROOT}/0123456789abcdef0123`,
      `${NODE_ROOT}/verified/k`,
    ])
      expect(checkHostPath(path, [NODE_ROOT], NODE_ROOT)).toEqual({
        ok: false,
        message: expect.stringContaining('node model cache'),
      });
  });
});
