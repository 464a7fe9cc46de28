// CLI: `node test/sim/main.ts <SGLang launch flags> [--sim-* flags]` runs one
// simulated SGLang server in the foreground (`make sim ARGS='...'`).
// Exits 2 with an argparse-style message on bad flags, as SGLang does. SIGTERM
// drains as SGLang's does (sigterm.ts): /ready 503 at once, generation still
// served, exit 0 once no request is left; SIGINT stops at once.

import { ScaledClock } from './clock.ts';
import { parseSimArgs } from './config.ts';
import { SimServer, type Logger } from './server.ts';

function buildLogger(): Logger {
  const write = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    console.error(JSON.stringify({ ts: new Date().toISOString(), level, msg, ...fields }));
  return { info: write('info'), warn: write('warn'), error: write('error') };
}

async function main(argv: string[]): Promise<void> {
  const parsed = parseSimArgs(argv);
  if (!parsed.ok) {
    console.error('usage: launch_server.py [-h] --model-path MODEL_PATH [options]');
    console.error(`launch_server.py: error: ${parsed.error}`);
    process.exit(2);
  }
  const cfg = parsed.value;
  const logger = buildLogger();
  const clock = new ScaledClock(cfg.sim.timeScale);
  const server = new SimServer(cfg, {
    clock,
    logger,
    crash: () => process.exit(137),
    toWallMs: (ms) => clock.toWallMs(ms),
    env: process.env,
  });
  const port = await server.listen();
  // The bound ports, so a launcher that passed port 0 (any free port) reads them here.
  logger.info('The server is fired up and ready to roll!', {
    worker: server.workerId,
    port,
    bootstrapPort: server.bootstrapPort,
    kvEvents: server.kvEvents?.bound ?? null,
    model: server.serving.servedModelName,
    mode: cfg.sglang.disaggregation_mode,
    timeScale: cfg.sim.timeScale,
  });
  const stop = (): void => {
    void server.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', () => {
    // SGLang's ranks past 0 wait for rank 0's shutdown broadcast (entrypoints/engine.py), which
    // a simulator gets from nobody: the orchestrator's kill ends them.
    if (cfg.sglang.node_rank >= 1) {
      logger.warn('SIGTERM received on a node rank past 0; waiting for rank 0 to stop the schedulers');
      return;
    }
    // Served on until no request is left at a wake of SGLang's watchdog (sigterm.ts).
    void server.terminate().then(stop);
  });
  process.on('SIGINT', stop);
}

await main(process.argv.slice(2));
