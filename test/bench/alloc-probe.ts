// A process's own allocation and CPU over a window, for bench-picker-alloc.ts:
// loaded with `node --import` into the process measured (the picker's gateway,
// the Node floor), the first SIGUSR2 opens the window and the second closes it
// and prints one JSON line (`msg: "alloc-probe"`) on stdout. Bytes allocated on
// V8's heap are counted from V8's own GC records (GCProfiler): what each
// collection found used before it, less what the previous one left, plus what
// is used at the window's end beyond the last one's leftovers. Buffers' bytes
// live outside V8's heap and are not counted (external memory is reported).
//
// With CACHEROUTE_ALLOC_PROBE_PROFILE=DIR the window is also profiled through
// the inspector: a sampling heap profile that keeps the objects collected since
// (where the garbage comes from; `node --heap-prof` keeps only the survivors)
// and a CPU profile, written to DIR as .heapprofile and .cpuprofile;
// CACHEROUTE_ALLOC_PROBE_HEAP=promoted|survivors narrows the heap profile, =snapshot adds a heap
// snapshot (below).

import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { GCProfiler, getHeapStatistics, writeHeapSnapshot } from 'node:v8';

const PROFILE_DIR = process.env['CACHEROUTE_ALLOC_PROBE_PROFILE'];
/**
 * What the heap profile keeps: everything allocated (default), `promoted` what no scavenge took
 * (outlived the young generation: the scavenges' copying and the mark-compacts' work), or
 * `survivors` only what is still on the heap at the window's end; `snapshot` samples as the
 * default does and also writes a heap snapshot at the window's end (what the process still holds,
 * each object with its retainers: who keeps a request's state).
 */
const HEAP_MODE = process.env['CACHEROUTE_ALLOC_PROBE_HEAP'] ?? 'all';
/** Bytes between heap samples: fine enough for a request's few hundred objects. */
const SAMPLING_INTERVAL = 4096;

interface Window {
  readonly profiler: GCProfiler;
  readonly cpu: NodeJS.CpuUsage;
  readonly used: number;
  readonly external: number;
  readonly startedAt: bigint;
}

let window: Window | undefined;
let session: Session | undefined;

async function startProfiles(): Promise<void> {
  session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: SAMPLING_INTERVAL,
    includeObjectsCollectedByMajorGC: HEAP_MODE !== 'survivors',
    includeObjectsCollectedByMinorGC: HEAP_MODE === 'all',
  });
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
}

async function writeProfiles(dir: string): Promise<void> {
  if (!session) return;
  const heap = await session.post('HeapProfiler.stopSampling');
  const cpu = await session.post('Profiler.stop');
  const name = path.join(dir, `alloc-probe-${process.pid}`);
  writeFileSync(`${name}.heapprofile`, JSON.stringify(heap.profile));
  writeFileSync(`${name}.cpuprofile`, JSON.stringify(cpu.profile));
  session.disconnect();
  session = undefined;
}

function open(): Window {
  const profiler = new GCProfiler();
  const stats = getHeapStatistics();
  profiler.start();
  return {
    profiler,
    cpu: process.cpuUsage(),
    used: stats.used_heap_size,
    external: stats.external_memory,
    startedAt: process.hrtime.bigint(),
  };
}

type GcRecord = NonNullable<ReturnType<GCProfiler['stop']>>['statistics'][number]['afterGC'];

function oldSpaceUsed(at: GcRecord): number {
  return at.heapSpaceStatistics.find((s) => s.spaceName === 'old_space')?.spaceUsedSize ?? 0;
}

function close(w: Window): object {
  const cpu = process.cpuUsage(w.cpu);
  const elapsedUs = Number(process.hrtime.bigint() - w.startedAt) / 1000;
  const profile = w.profiler.stop();
  const stats = getHeapStatistics();
  let allocated = 0;
  let leftover = w.used;
  const kinds: Record<string, number> = {};
  let gcCost = 0;
  let promoted = 0;
  for (const gc of profile?.statistics ?? []) {
    if (gc.gcType === 'Scavenge')
      promoted += Math.max(0, oldSpaceUsed(gc.afterGC) - oldSpaceUsed(gc.beforeGC));
    allocated += Math.max(0, gc.beforeGC.heapStatistics.usedHeapSize - leftover);
    leftover = gc.afterGC.heapStatistics.usedHeapSize;
    kinds[gc.gcType] = (kinds[gc.gcType] ?? 0) + 1;
    gcCost += gc.cost;
  }
  allocated += Math.max(0, stats.used_heap_size - leftover);
  return {
    msg: 'alloc-probe',
    cpuUserUs: cpu.user,
    cpuSystemUs: cpu.system,
    elapsedUs,
    heapAllocatedBytes: allocated,
    // What scavenges moved to the old generation: objects that outlived two of them (each one
    // copied their bytes), for mark-compacts to collect later.
    scavengePromotedBytes: promoted,
    gcs: kinds,
    // V8's own figure for the collections' cost (GCProfiler's `cost`).
    gcCost,
    externalBytesDelta: stats.external_memory - w.external,
  };
}

process.on('SIGUSR2', () => {
  void (async () => {
    if (window === undefined) {
      if (PROFILE_DIR !== undefined) await startProfiles();
      window = open();
      process.stdout.write(`${JSON.stringify({ msg: 'alloc-probe-open' })}\n`);
      return;
    }
    const report = close(window);
    window = undefined;
    if (PROFILE_DIR !== undefined) await writeProfiles(PROFILE_DIR);
    if (PROFILE_DIR !== undefined && HEAP_MODE === 'snapshot')
      writeHeapSnapshot(path.join(PROFILE_DIR, `alloc-probe-${process.pid}.heapsnapshot`));
    process.stdout.write(`${JSON.stringify(report)}\n`);
  })();
});
