// Tenants from a file (`--tenants tenants.json`, with `--routes`): the same
// rules as discovery, for a gateway run without Kubernetes. The file is an
// array of { namespace, name, models, keys, limits?, priority? }; `keys`
// holds the API keys themselves, so the file is a secret (mount it from one).

import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { API_VERSION } from '#api';
import { digestApiKey } from '#api/gateway-keys.ts';
import { buildTenantDirectory } from './build-directory.ts';
import { KeyDirectory } from './tenant.ts';

const TenantFile = z.array(
  z.object({
    namespace: z.string().min(1),
    name: z.string().min(1),
    models: z.array(z.string()),
    keys: z.array(z.string()).min(1),
    limits: z.record(z.string(), z.unknown()).optional(),
    priority: z.number().optional(),
  }),
);

export function loadTenantFile(path: string): KeyDirectory {
  const entries = TenantFile.parse(JSON.parse(readFileSync(path, 'utf8')));
  const secretName = (name: string): string => `${name}-api-keys`;
  const built = buildTenantDirectory({
    tenants: entries.map((e) => ({
      apiVersion: API_VERSION,
      kind: 'Tenant',
      metadata: { namespace: e.namespace, name: e.name },
      spec: {
        apiKeys: { secretRef: { name: secretName(e.name) } },
        models: e.models,
        ...(e.limits ? { limits: e.limits } : {}),
        ...(e.priority !== undefined ? { priority: e.priority } : {}),
      },
    })),
    keyDigests: Object.fromEntries(
      entries.map((e) => [
        `${e.namespace}/${secretName(e.name)}`,
        Object.fromEntries(e.keys.map((k, i) => [`key-${i}`, digestApiKey(k)])),
      ]),
    ),
  });
  const invalid = entries.length - built.tenants.length;
  if (invalid > 0)
    throw new Error(
      `${invalid} tenant(s) in ${path} are invalid as Tenant specs (models: at least one; priority -100..100; limits >= 1)`,
    );
  const dir = new KeyDirectory();
  dir.replace(built);
  dir.ready = true;
  return dir;
}
