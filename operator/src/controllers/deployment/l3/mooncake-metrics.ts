// Reads a Mooncake master's gauges over HTTP (the shell of mooncake-status.ts), by the store
// pod's IP as the operator reads its runtimes, with a deadline: a master that hangs is said in
// status, never a reconcile that waits.
import { MASTER_METRICS_PORT } from './mooncake.ts';
import { parseMasterGauges, type MasterGauges } from './mooncake-status.ts';

export async function readMasterGauges(
  ip: string,
  opts: { timeoutMs: number; signal?: AbortSignal | undefined },
): Promise<MasterGauges> {
  const host = ip.includes(':') ? `[${ip}]` : ip;
  const signals = [AbortSignal.timeout(opts.timeoutMs), ...(opts.signal ? [opts.signal] : [])];
  try {
    const r = await fetch(`http://${host}:${MASTER_METRICS_PORT}/metrics`, {
      signal: AbortSignal.any(signals),
    });
    if (r.status !== 200) return { ok: false, error: `/metrics answered ${r.status}` };
    return { ok: true, gauges: parseMasterGauges(await r.text()) };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}
