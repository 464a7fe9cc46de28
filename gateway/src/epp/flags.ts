// The gateway's mode and its endpoint picker's listeners (server.ts flags):
// `--mode standalone` (the proxy, the default), `picker` (only the ext_proc
// endpoint picker behind a gateway's Envoy, the API port serving the admin
// routes), or `both`; `--picker-port` (9002) and `--picker-health-port` (9003),
// GIE's defaults; TLS when `--picker-tls-cert` and `--picker-tls-key` are given.
// `--picker-conformance-hooks`: GIE's conformance test hooks (conformance-hooks.ts),
// for a test bench only; off by default and never set by the chart.

import { z } from 'zod';

export const GatewayMode = z.enum(['standalone', 'picker', 'both'], {
  error: 'give standalone (the proxy), picker (an ext_proc endpoint picker behind Envoy) or both',
});
export type GatewayMode = z.infer<typeof GatewayMode>;

const Port = z.coerce
  .number({ error: 'give a port number' })
  .int('give a port number')
  .min(0, 'give a port from 0 to 65535 (0: one the kernel picks)')
  .max(65535, 'give a port from 0 to 65535 (0: one the kernel picks)');

export interface PickerFlags {
  readonly mode: GatewayMode;
  readonly port: number;
  readonly healthPort: number;
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  /** GIE's conformance test hooks: a client names its endpoint. Tests only. */
  readonly conformanceHooks?: true;
}

type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

export function parsePickerFlags(values: {
  readonly mode?: string | undefined;
  readonly 'picker-port'?: string | undefined;
  readonly 'picker-health-port'?: string | undefined;
  readonly 'picker-tls-cert'?: string | undefined;
  readonly 'picker-tls-key'?: string | undefined;
  readonly 'picker-conformance-hooks'?: boolean | undefined;
}): Parsed<PickerFlags> {
  const mode = GatewayMode.safeParse(values.mode ?? 'standalone');
  if (!mode.success) return { ok: false, error: `--mode: ${mode.error.issues[0]?.message ?? 'invalid'}` };
  const port = Port.safeParse(values['picker-port'] ?? '9002');
  if (!port.success)
    return { ok: false, error: `--picker-port: ${port.error.issues[0]?.message ?? 'invalid'}` };
  const health = Port.safeParse(values['picker-health-port'] ?? '9003');
  if (!health.success)
    return { ok: false, error: `--picker-health-port: ${health.error.issues[0]?.message ?? 'invalid'}` };
  const cert = values['picker-tls-cert'];
  const key = values['picker-tls-key'];
  if ((cert === undefined) !== (key === undefined))
    return {
      ok: false,
      error: '--picker-tls-cert and --picker-tls-key go together: give both, or neither (plaintext)',
    };
  const hooks = values['picker-conformance-hooks'] === true;
  if (hooks && mode.data === 'standalone')
    return {
      ok: false,
      error:
        '--picker-conformance-hooks: only for the endpoint picker; give --mode picker or both, or drop the flag',
    };
  return {
    ok: true,
    value: {
      mode: mode.data,
      port: port.data,
      healthPort: health.data,
      ...(cert !== undefined && key !== undefined ? { tls: { certFile: cert, keyFile: key } } : {}),
      ...(hooks ? { conformanceHooks: true as const } : {}),
    },
  };
}
