// `--mode picker` as its own process: the ext_proc endpoint picker and its
// gRPC health on the ports it says it bound, the generation API left to
// Envoy (the API port serves the admin routes only), a request through a
// real Envoy to a runtime, and SIGTERM.

import { once } from 'node:events';
import { credentials, loadPackageDefinition, type Client, type GrpcObject } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { startEnvoy, type RunningEnvoy } from '../../test/support/envoy.ts';
import { startFakeUpstream, type FakeUpstream } from '../../test/support/gateway/fake-upstream.ts';
import {
  spawnGateway,
  writeRoutesFile,
  type GatewayProcess,
} from '../../test/support/gateway/gateway-process.ts';
import { EXT_PROC_SERVICE, loadProtos } from './epp/protos.ts';

let up: FakeUpstream | undefined;
let gw: GatewayProcess | undefined;
let envoy: RunningEnvoy | undefined;
let removeRoutes: (() => void) | undefined;

afterEach(async () => {
  await envoy?.close();
  if (gw && gw.proc.exitCode === null) {
    gw.proc.kill('SIGKILL');
    await gw.exited;
  }
  await up?.close();
  removeRoutes?.();
  envoy = undefined;
  gw = undefined;
  up = undefined;
});

type HealthClient = Client & {
  Check(req: { service: string }, cb: (err: Error | null, res?: { status: string }) => void): void;
};

async function healthOf(port: number, service: string): Promise<string> {
  const grpc = loadPackageDefinition(loadProtos()) as unknown as { grpc: { health: { v1: GrpcObject } } };
  const Health = grpc.grpc.health.v1['Health'] as unknown as new (
    address: string,
    creds: unknown,
  ) => HealthClient;
  const client = new Health(`127.0.0.1:${port}`, credentials.createInsecure());
  try {
    return await new Promise((resolve, reject) =>
      client.Check({ service }, (err, res) => (err ? reject(err) : resolve(res?.status ?? ''))),
    );
  } finally {
    client.close();
  }
}

describe('gateway --mode picker', () => {
  it('serves ext_proc and gRPC health, routes through Envoy, leaves the API to it, exits 0 on SIGTERM', async () => {
    up = await startFakeUpstream();
    const routes = writeRoutesFile(up.url);
    removeRoutes = routes.remove;
    gw = await spawnGateway(routes.path, [
      '--mode',
      'picker',
      '--picker-port',
      '0',
      '--picker-health-port',
      '0',
    ]);
    const picker = gw.picker;
    if (!picker) throw new Error('the listening line names no picker ports');
    for (const service of ['liveness', 'readiness', EXT_PROC_SERVICE])
      expect(await healthOf(picker.healthPort, service), service).toBe('SERVING');
    const direct = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(direct.status).toBe(404);
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
    envoy = await startEnvoy({ kind: 'picker', pickerPort: picker.port });
    const viaEnvoy = await fetch(`${envoy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(viaEnvoy.status).toBe(200);
    expect(viaEnvoy.headers.get('x-cacheroute-endpoint')).toBe('a');
    expect(up.received.map((r) => r.path)).toEqual(['/v1/chat/completions']);
    gw.proc.kill('SIGTERM');
    const [code] = (await once(gw.proc, 'exit')) as [number | null];
    expect(code).toBe(0);
  }, 30_000);
});
