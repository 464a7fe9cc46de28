import { describe, expect, it } from 'vitest';
import { parsePickerFlags } from './flags.ts';

describe('parsePickerFlags', () => {
  it("standalone by default; GIE's ports 9002 and 9003; plaintext unless both TLS files are given", () => {
    expect(parsePickerFlags({})).toEqual({
      ok: true,
      value: { mode: 'standalone', port: 9002, healthPort: 9003 },
    });
    expect(
      parsePickerFlags({ mode: 'both', 'picker-port': '0', 'picker-tls-cert': 'c', 'picker-tls-key': 'k' }),
    ).toEqual({
      ok: true,
      value: { mode: 'both', port: 0, healthPort: 9003, tls: { certFile: 'c', keyFile: 'k' } },
    });
  });

  it('says which flag to change', () => {
    const error = (v: Parameters<typeof parsePickerFlags>[0]): string => {
      const r = parsePickerFlags(v);
      return r.ok ? '' : r.error;
    };
    expect(error({ mode: 'epp' })).toContain('--mode: give standalone');
    expect(error({ 'picker-port': '70000' })).toContain('--picker-port: give a port from 0 to 65535');
    expect(error({ 'picker-health-port': 'x' })).toContain('--picker-health-port');
    expect(error({ 'picker-tls-cert': 'c' })).toContain('--picker-tls-cert and --picker-tls-key go together');
    expect(error({ 'picker-conformance-hooks': true })).toContain('give --mode picker or both');
  });

  it("GIE's conformance test hooks only when asked for", () => {
    expect(parsePickerFlags({ mode: 'picker' })).not.toHaveProperty('value.conformanceHooks');
    expect(parsePickerFlags({ mode: 'picker', 'picker-conformance-hooks': true })).toMatchObject({
      ok: true,
      value: { conformanceHooks: true },
    });
  });
});
