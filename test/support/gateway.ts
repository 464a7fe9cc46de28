// The gateway in the test process, discovering from a real API server: its
// routing table fed by the discovery watcher, as `gateway/src/server.ts` wires it.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import type { SecretLocation } from '#api/gateway-keys.ts';
import { KubeClient } from '#kube/client.ts';
import { build } from '../../gateway/src/app.ts';
import { RuntimeKeyWatcher } from '../../gateway/src/discovery/runtime-key-watcher.ts';
import { DiscoveryWatcher } from '../../gateway/src/discovery/watcher.ts';
import { QualificationWatcher } from '../../gateway/src/discovery/qualification-watcher.ts';
import type { Tokenizer } from '../../gateway/src/tokenize/tokenizer.ts';

export interface InProcessGateway {
  readonly app: FastifyInstance;
  /** Its address when started with `listen` (the operator reads its cache report there). */
  readonly url: string | undefined;
  readonly watcher: DiscoveryWatcher;
  stop(): Promise<void>;
}

/**
 * The Secret the operator keeps for the gateway (ADR 0027), where tests put it: in the test's
 * namespace. An operator that serves this gateway runs with `gatewayKeysSecret` set to it.
 */
export function testKeysSecret(namespace: string): SecretLocation {
  return { namespace, name: 'cacheroute-gateway-keys' };
}

export async function startInProcessGateway(
  kubeconfig: string,
  namespaces: readonly string[],
  opts: {
    tokenizers?: ReadonlyMap<string, Tokenizer>;
    listen?: boolean;
    /** Default: testKeysSecret of the first namespace. */
    keysSecret?: SecretLocation;
    /** Watch Qualifications for the plots on /status, as server.ts does (the CRD must be installed). */
    qualifications?: boolean;
  } = {},
): Promise<InProcessGateway> {
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  const client = await KubeClient.fromKubeConfig(kc);
  const watcher = new DiscoveryWatcher({ client, namespaces: [...namespaces], coalesceMs: 20 });
  // The runtimes' API keys, as server.ts wires them: the runtimes refuse requests without one.
  const keysSecret = opts.keysSecret ?? testKeysSecret(namespaces[0] ?? 'default');
  const runtimeKeys = new RuntimeKeyWatcher({ client, keysSecret });
  const qualifications = opts.qualifications
    ? new QualificationWatcher({ client, namespaces: [...namespaces], coalesceMs: 20 })
    : undefined;
  const app = build({
    table: watcher.table,
    runtimeKeys: runtimeKeys.keys,
    ...(qualifications ? { qualifications: () => qualifications.views() } : {}),
    ...(opts.tokenizers ? { tokenizers: opts.tokenizers } : {}),
  });
  watcher.start();
  runtimeKeys.start();
  qualifications?.start();
  const url = opts.listen ? await app.listen({ port: 0, host: '127.0.0.1' }) : undefined;
  return {
    app,
    url,
    watcher,
    async stop() {
      await app.close();
      await watcher.stop();
      await runtimeKeys.stop();
      await qualifications?.stop();
      await client.close();
    },
  };
}
