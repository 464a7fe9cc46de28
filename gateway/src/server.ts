// Listen: `node gateway/src/server.ts [--kubeconfig f] [--namespace a,b] [--port 8080] [--host 0.0.0.0]`.
// The routing table comes from Deployment and CachePolicy status (discovery/,
// default kubeconfig: $KUBECONFIG, ~/.kube/config, then in-cluster), or with
// `--routes routes.json` from a JSON file: an array of ModelRoute objects
// (routing/table.ts); settings objects are parsed with the CachePolicy
// schemas, so defaults apply.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { Admission, ResultReuse, RoutingSettings } from '../../operator/src/api/index.ts';
import { build } from './app.ts';
import { openRouteSource, parseRouteSourceFlags } from './discovery/source.ts';
import type { ModelRoute } from './routing/table.ts';

const RouteFile = z.array(
  z.looseObject({
    model: z.string(),
    deployment: z.string(),
    fingerprint: z.string(),
    salt: z.string(),
    routing: RoutingSettings.prefault({}),
    admission: Admission.prefault({}),
    reuse: ResultReuse.prefault({}),
    endpoints: z.array(
      z.object({
        id: z.string(),
        url: z.string(),
        role: z.enum(['standalone', 'prefill', 'decode']).default('standalone'),
        fingerprint: z.string(),
        verified: z.boolean(),
        ready: z.boolean(),
        bootstrapPort: z.number().int().optional(),
        generation: z.string().optional(),
      }),
    ),
  }),
);

export function loadRoutes(path: string): ModelRoute[] {
  return RouteFile.parse(JSON.parse(readFileSync(path, 'utf8'))) as ModelRoute[];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      routes: { type: 'string' },
      kubeconfig: { type: 'string' },
      namespace: { type: 'string', multiple: true },
      port: { type: 'string', default: '8080' },
      host: { type: 'string', default: '0.0.0.0' },
      'log-level': { type: 'string', default: 'info' },
      // Share exact-reuse results (and in-flight de-duplication) across replicas.
      'redis-url': { type: 'string' },
      'redis-max-entries': { type: 'string', default: '10000' },
    },
  });
  const flags = parseRouteSourceFlags(values);
  if (!flags.ok) exitWithUsage(flags.error);
  const source = await openRouteSource(flags.value, loadRoutes).catch((err: unknown) =>
    exitWithUsage(err instanceof Error ? err.message : String(err)),
  );
  const table = source.table;
  const app = build({
    table,
    logger: { level: values['log-level'] },
    defaultMetrics: true,
    scrapeIntervalMs: 1000,
    ...(values['redis-url']
      ? { redis: { url: values['redis-url'], maxEntries: Number(values['redis-max-entries']) } }
      : {}),
  });
  app.addHook('onClose', () => source.close());
  source.start(app.log);
  const close = () => void app.close().then(() => process.exit(0));
  process.once('SIGTERM', close);
  process.once('SIGINT', close);
  await app.listen({ port: Number(values.port), host: values.host });
}

function exitWithUsage(message: string): never {
  process.stderr.write(`gateway: ${message}\n`);
  process.exit(2);
}

if (import.meta.main) await main();
