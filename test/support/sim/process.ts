// The simulator as its own process (test/sim/main.ts), for tests of what only a
// process shows: signals, exit codes. It listens on port 0 and reports the port
// the kernel gave it on its start-up line; nothing guesses a free port first.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { waitForJsonLine } from '../json-lines.ts';

export const SIM_MAIN = fileURLToPath(new URL('../../sim/main.ts', import.meta.url));

/** What test/sim/main.ts logs once it listens (its fields that tests read). */
const StartupLine = z.object({
  msg: z.literal('The server is fired up and ready to roll!'),
  port: z.number().int().positive(),
  bootstrapPort: z.number().int().positive().nullable(),
});

export interface SimProcess {
  readonly url: string;
  /** The prefill bootstrap server's port (with --disaggregation-bootstrap-port 0); null when none. */
  readonly bootstrapPort: number | null;
  readonly proc: ChildProcess;
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
}

/** Starts the simulator on 127.0.0.1, port 0, with SGLang's and --sim-* `argv`; resolves once it listens. */
export async function spawnSim(argv: readonly string[]): Promise<SimProcess> {
  const proc = spawn(process.execPath, [SIM_MAIN, ...argv, '--host', '127.0.0.1', '--port', '0'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  if (!proc.stderr) throw new Error('the simulator process has no stderr pipe');
  const line = await waitForJsonLine(proc, proc.stderr, (l) => StartupLine.safeParse(l).success, {
    what: 'the simulator',
  }).catch((e: unknown) => {
    proc.kill('SIGKILL');
    throw e;
  });
  const started = StartupLine.parse(line);
  return { url: `http://127.0.0.1:${started.port}`, bootstrapPort: started.bootstrapPort, proc, exited };
}
