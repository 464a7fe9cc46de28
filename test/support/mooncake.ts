// Mooncake's distributed KV store as a platform team runs it, on this machine: `mooncake_master`
// (the metadata service, with its HTTP metrics) and one store node (`mooncake_client`, which
// holds the memory segment the KV lives in), from the kit's venv
// (`mooncake-transfer-engine-non-cuda`, TCP transport, no RDMA device). SGLang servers join it
// as clients that contribute no memory (MOONCAKE_GLOBAL_SEGMENT_SIZE=0), so what they put
// outlives them.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listensOn, withFreshPorts } from './fresh-ports.ts';
import {
  httpStatus,
  spawnManaged,
  stopManaged,
  waitUntilAnswering,
  type ManagedProcess,
} from './processes.ts';
import { ensureSglangKit } from './sglang-kit.ts';

export interface MooncakeStore {
  /** host:port of the master's RPC service. */
  readonly master: string;
  readonly metricsPort: number;
  /** The store node's segment, bytes. */
  readonly segmentBytes: number;
  /** The master's gauges (`master_key_count`, `master_allocated_bytes`, `master_total_capacity_bytes`, ...). */
  readMetrics(): Promise<Map<string, number>>;
  /** What an SGLang server needs in its env to use this store as HiCache's `mooncake` backend. */
  clientEnv(): Record<string, string>;
  stop(): Promise<void>;
}

const SEGMENT_BYTES = 512 * 1024 * 1024;

export async function startMooncakeStore(): Promise<MooncakeStore> {
  const bin = join(ensureSglangKit(), 'bin');
  if (!existsSync(join(bin, 'mooncake_master')))
    throw new Error(
      `no mooncake_master in ${bin}: the kit's venv needs mooncake-transfer-engine-non-cuda (hack/sglang/requirements.in) and Debian's libibverbs1`,
    );
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-mooncake-'));
  const procs: ManagedProcess[] = [];
  const stop = async (): Promise<void> => {
    for (const p of procs.reverse()) await stopManaged(p, 5_000);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    return await withFreshPorts(
      3,
      async ([rpc = 0, metrics = 0, node = 0]) => {
        const master = spawnManaged(
          'mooncake_master',
          join(bin, 'mooncake_master'),
          [
            `--rpc_port=${rpc}`,
            `--metrics_port=${metrics}`,
            '--rpc_address=127.0.0.1',
            '--metrics_host=127.0.0.1',
          ],
          { logPath: join(dir, 'master.log') },
        );
        procs.push(master);
        await waitUntilAnswering(
          master,
          async () =>
            listensOn(master.pid, rpc) && (await httpStatus(`http://127.0.0.1:${metrics}/metrics`)) === 200,
          { what: 'mooncake_master', timeoutMs: 30_000, intervalMs: 200 },
        );
        const storeNode = spawnManaged(
          'mooncake_client',
          join(bin, 'mooncake_client'),
          [
            `--master_server_address=127.0.0.1:${rpc}`,
            `--global_segment_size=${SEGMENT_BYTES}`,
            '--protocol=tcp',
            '--metadata_server=P2PHANDSHAKE',
            '--host=127.0.0.1',
            `--port=${node}`,
          ],
          { logPath: join(dir, 'store.log') },
        );
        procs.push(storeNode);
        const readMetrics = async (): Promise<Map<string, number>> => {
          const text = await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text();
          const out = new Map<string, number>();
          for (const m of text.matchAll(/^(master_[a-z_]+) (\d+(?:\.\d+)?)$/gm))
            out.set(m[1] ?? '', Number(m[2]));
          return out;
        };
        // The node has mounted its segment once the master counts it.
        await waitUntilAnswering(
          storeNode,
          async () => (await readMetrics()).get('master_total_capacity_bytes') === SEGMENT_BYTES,
          { what: 'mooncake_client', timeoutMs: 30_000, intervalMs: 200 },
        );
        return {
          master: `127.0.0.1:${rpc}`,
          metricsPort: metrics,
          segmentBytes: SEGMENT_BYTES,
          readMetrics,
          clientEnv: () => ({
            MOONCAKE_MASTER: `127.0.0.1:${rpc}`,
            MOONCAKE_MASTER_METRICS_PORT: String(metrics),
            MOONCAKE_PROTOCOL: 'tcp',
            MOONCAKE_DEVICE: '',
            MOONCAKE_TE_META_DATA_SERVER: 'P2PHANDSHAKE',
            // A client that lends no memory: the KV lives in the store node's segment.
            MOONCAKE_GLOBAL_SEGMENT_SIZE: '0',
            MOONCAKE_LOCAL_HOSTNAME: '127.0.0.1',
          }),
          stop,
        };
      },
      { what: 'mooncake' },
    );
  } catch (err) {
    await stop();
    throw err;
  }
}
