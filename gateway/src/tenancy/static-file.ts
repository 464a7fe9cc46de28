// Tenants from a file (`--tenants tenants.json`, with `--routes`): the same
// rules as discovery, for a gateway run without Kubernetes. The file is an
// array of { namespace, name, models, keys, limits?, priority? }; `keys`
// holds the API keys themselves, so the file is a secret (mount it from one).

import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { API_KEYS_LABEL, API_VERSION } from '#api';
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
    secrets: entries.map((e) => ({
      metadata: { namespace: e.namespace, name: secretName(e.name), labels: { [API_KEYS_LABEL]: 'true' } },
      data: Object.fromEntries(e.keys.map((k, i) => [`key-${i}`, Buffer.from(k).toString('base64')])),
    })),
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
