// Listen: `node gateway/src/server.ts --routes routes.json [--port 8080] [--host 0.0.0.0]`.
// Until discovery from Kubernetes lands, the routing table comes from a JSON
// file: an array of ModelRoute objects (routing/table.ts); settings objects
// are parsed with the CachePolicy schemas, so defaults apply.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { Admission, ResultReuse, RoutingSettings } from '../../operator/src/api/index.ts';
import { build } from './app.ts';
import { StaticRoutingTable, type ModelRoute } from './routing/table.ts';

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
      port: { type: 'string', default: '8080' },
      host: { type: 'string', default: '0.0.0.0' },
      'log-level': { type: 'string', default: 'info' },
    },
  });
  if (!values.routes) throw new Error('--routes <file.json> is required until discovery lands');
  const table = new StaticRoutingTable(loadRoutes(values.routes));
  const app = build({
    table,
    logger: { level: values['log-level'] },
    defaultMetrics: true,
    scrapeIntervalMs: 1000,
  });
  const close = () => void app.close().then(() => process.exit(0));
  process.once('SIGTERM', close);
  process.once('SIGINT', close);
  await app.listen({ port: Number(values.port), host: values.host });
}

if (import.meta.main) await main();
