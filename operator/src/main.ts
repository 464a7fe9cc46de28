// The operator process: `node operator/src/main.ts [flags]` (`make run-operator`).
import { z } from 'zod';
import { DEFAULT_OPENROUTER_BASE_URL } from './controllers/task/reconciler.ts';
import { startOperator } from './operator.ts';
import { createLogger } from './runtime/logger.ts';

const Flags = z.object({
  kubeconfig: z.string().optional(),
  namespace: z.string().optional(),
  'metrics-port': z.coerce.number().int().min(0).max(65535).default(8080),
  'metrics-host': z.string().default('0.0.0.0'),
  'leader-elect': z.enum(['true', 'false']).default('true'),
  'lease-namespace': z.string().default('cacheroute-system'),
  'lease-name': z.string().default('cacheroute-operator'),
  'log-level': z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  concurrency: z.coerce.number().int().min(1).max(64).default(4),
  'openrouter-base-url': z.url({ protocol: /^https?$/ }).default(DEFAULT_OPENROUTER_BASE_URL),
});
export type OperatorFlags = z.infer<typeof Flags>;

const USAGE = `usage: operator [--kubeconfig PATH] [--namespace NS] [--metrics-port 8080] [--metrics-host 0.0.0.0]
  [--leader-elect true|false] [--lease-namespace cacheroute-system] [--lease-name cacheroute-operator]
  [--log-level debug|info|warn|error] [--concurrency 4] [--openrouter-base-url https://openrouter.ai/api/v1]`;

export function parseFlags(
  argv: readonly string[],
): { ok: true; value: OperatorFlags } | { ok: false; error: string } {
  const raw: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('--')) return { ok: false, error: `unexpected argument ${arg}` };
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const value = eq < 0 ? argv[++i] : arg.slice(eq + 1);
    if (!(name in Flags.shape)) return { ok: false, error: `unknown flag --${name}` };
    if (value === undefined) return { ok: false, error: `--${name} needs a value` };
    raw[name] = value;
  }
  const parsed = Flags.safeParse(raw);
  if (!parsed.success) {
    return {
      ok: false,
      error: parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('; '),
    };
  }
  return { ok: true, value: parsed.data };
}

export async function runOperator(flags: OperatorFlags): Promise<number> {
  const logger = createLogger({ level: flags['log-level'], fields: { component: 'operator' } });
  const op = await startOperator({
    kubeconfig: flags.kubeconfig,
    namespace: flags.namespace,
    logger,
    leaderElection:
      flags['leader-elect'] === 'true'
        ? { namespace: flags['lease-namespace'], name: flags['lease-name'] }
        : false,
    http: { host: flags['metrics-host'], port: flags['metrics-port'] },
    concurrency: flags.concurrency,
    openrouterBaseUrl: flags['openrouter-base-url'],
  });
  op.manager.handleSignals();
  const address = op.manager.address();
  logger.info('operator started', { metrics: address ? `${address.address}:${address.port}` : 'off' });
  const exit = await op.manager.wait();
  await op.client.close();
  logger.info('operator stopped', { reason: exit.reason });
  // Losing the lease ends the process: a fresh start rejoins the election with empty caches.
  return exit.reason === 'leadership-lost' ? 1 : 0;
}

if (import.meta.main) {
  const flags = parseFlags(process.argv.slice(2));
  if (!flags.ok) {
    process.stderr.write(`operator: ${flags.error}\n${USAGE}\n`);
    process.exit(2);
  }
  process.exitCode = await runOperator(flags.value);
}
