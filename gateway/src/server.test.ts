// The gateway process itself under a real SIGTERM (what the kubelet sends
// after the chart's preStop sleep): readiness turns false and new requests get
// 503 GW_DRAINING at once, the requests in flight (a held stream, a held
// buffered answer) finish, and the process exits 0; past the drain timeout
// what is left is cut and the process still exits 0.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { Gate, startFakeUpstream, type FakeUpstream } from '../../test/support/gateway/fake-upstream.ts';
import {
  GATEWAY_SERVER as SERVER,
  spawnGateway,
  writeRoutesFile,
  type GatewayProcess,
} from '../../test/support/gateway/gateway-process.ts';

let up: FakeUpstream | undefined;
let child: ChildProcess | undefined;
let removeRoutes: (() => void) | undefined;

afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await up?.close();
  removeRoutes?.();
});

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** One request; resolves with the answer, or the connection error's code. */
function post(url: string, agent: http.Agent, stream = false): Promise<Answer | string> {
  const body = JSON.stringify({ model: 'm', stream, messages: [{ role: 'user', content: 'hi' }] });
  return new Promise((resolve) => {
    const req = http.request(
      `${url}/v1/chat/completions`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
        res.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    req.end(body);
  });
}

/** /readyz once it no longer says ready (the signal takes a moment to arrive), or after 2 s. */
async function readinessAfterSigterm(base: string): Promise<Response> {
  let readyz = await fetch(`${base}/readyz`);
  for (let i = 0; i < 200 && readyz.status === 200; i++) {
    await new Promise((r) => setTimeout(r, 10));
    readyz = await fetch(`${base}/readyz`);
  }
  return readyz;
}

function statusOf(a: Answer | string): number | string {
  return typeof a === 'string' ? a : a.status;
}

async function startGateway(
  upstream: FakeUpstream,
  extra: string[] = [],
  opts: { admin?: boolean } = {},
): Promise<GatewayProcess> {
  const routes = writeRoutesFile(upstream.url);
  removeRoutes = routes.remove;
  const gw = await spawnGateway(routes.path, extra, opts);
  child = gw.proc;
  return gw;
}

// Each test starts a gateway process and drains it (SIGTERM, readiness, exit): about 4-5 s alone on
// this machine, more under load, so vitest's 5 s default cut them short (a timeout, not a failure).
describe('gateway process on SIGTERM', { timeout: 30_000 }, () => {
  it('turns unready and refuses new requests with 503 GW_DRAINING, finishes a held stream and a held answer, and exits 0', async () => {
    const upstream = await startFakeUpstream();
    up = upstream;
    const { url, proc, exited } = await startGateway(upstream);

    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    expect(statusOf(await post(url, agent))).toBe(200); // a warm keep-alive connection
    upstream.streamGate = new Gate();
    const stream = post(url, new http.Agent(), true);
    await upstream.streamGate.untilWaiting(1);
    upstream.headGate = new Gate();
    const held = post(url, new http.Agent());
    await upstream.headGate.untilWaiting(1);

    proc.kill('SIGTERM');
    const readyz = await readinessAfterSigterm(url);
    expect(readyz.status).toBe(503);
    expect(await readyz.json()).toEqual({ status: 'draining' });
    // New work on the warm connection: refused, with a Retry-After, and the connection is to be closed.
    const refused = await post(url, agent);
    expect(typeof refused).toBe('object');
    const r = refused as Answer;
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(r.headers['connection']).toBe('close');
    expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'GW_DRAINING', type: 'server_error' } });
    expect(upstream.received).toHaveLength(3); // nothing new went upstream

    upstream.headGate.open();
    expect(statusOf(await held)).toBe(200);
    expect(proc.exitCode).toBeNull(); // the stream is still in flight
    upstream.streamGate.open();
    const streamed = await stream;
    expect(statusOf(streamed)).toBe(200);
    expect((streamed as Answer).body).toContain('data: [DONE]');
    const [code, signal] = await exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    agent.destroy();
  });

  it('with --admin-port serves status, metrics and probes only there, and the API only on the API port', async () => {
    const upstream = await startFakeUpstream();
    up = upstream;
    const { url, adminUrl, proc, exited } = await startGateway(upstream, [], { admin: true });
    expect(adminUrl).not.toBe(url);
    expect(statusOf(await post(url, new http.Agent()))).toBe(200);
    for (const path of ['/status', '/status.json', '/metrics', '/readyz', '/healthz']) {
      const onApi = await fetch(`${url}${path}`);
      expect({ path, status: onApi.status }).toEqual({ path, status: 404 });
      expect(await onApi.json()).toMatchObject({ error: { code: 'GW_NOT_FOUND' } });
      expect({ path, status: (await fetch(`${adminUrl}${path}`)).status }).toEqual({ path, status: 200 });
    }
    // The admin listener still sees what the API port served (the status hooks are on the API app).
    const view = (await (await fetch(`${adminUrl}/status.json`)).json()) as {
      deployments: { endpoints: { id: string; served: number }[] }[];
    };
    expect(view.deployments[0]?.endpoints[0]).toMatchObject({ id: 'a', served: 1 });
    expect(await (await fetch(`${adminUrl}/metrics`)).text()).toContain('cacheroute_gateway_requests_total');
    expect((await fetch(`${adminUrl}/v1/models`)).status).toBe(404);
    // Draining shows on the admin listener's readiness.
    proc.kill('SIGTERM');
    expect((await readinessAfterSigterm(adminUrl)).status).toBe(503);
    const [code] = await exited;
    expect(code).toBe(0);
  });

  it('past --drain-timeout-seconds cuts what is still in flight and exits 0', async () => {
    const upstream = await startFakeUpstream();
    up = upstream;
    const { url, proc, exited } = await startGateway(upstream, ['--drain-timeout-seconds', '1']);
    upstream.streamGate = new Gate();
    const stream = post(url, new http.Agent(), true);
    await upstream.streamGate.untilWaiting(1);

    proc.kill('SIGTERM');
    const [code, signal] = await exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    // The stream was cut: it never saw its end.
    const cut = await stream;
    expect(typeof cut === 'string' || !cut.body.includes('[DONE]')).toBe(true);
  });

  it('refuses a bad drain timeout with a message naming the flag', async () => {
    const proc = spawn(
      process.execPath,
      [SERVER, '--routes', '/nonexistent.json', '--drain-timeout-seconds', 'soon'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    child = proc;
    let err = '';
    proc.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(proc, 'exit')) as [number | null];
    expect(code).toBe(2);
    expect(err).toContain('--drain-timeout-seconds: give a number of seconds');
  });

  it('refuses a port out of range with a message naming the flag', async () => {
    const proc = spawn(process.execPath, [SERVER, '--routes', '/nonexistent.json', '--port', '70000'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child = proc;
    let err = '';
    proc.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(proc, 'exit')) as [number | null];
    expect(code).toBe(2);
    expect(err).toContain('--port: give a port from 0 to 65535');
  });

  it('checks API keys by default: --routes needs --tenants, then a request without a key gets 401', async () => {
    const refused = spawn(process.execPath, [SERVER, '--routes', '/nonexistent.json'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child = refused;
    let err = '';
    refused.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(refused, 'exit')) as [number | null];
    expect(code).toBe(2);
    expect(err).toContain('--auth keys with --routes needs --tenants FILE');

    const upstream = await startFakeUpstream();
    up = upstream;
    const dir = mkdtempSync(join(tmpdir(), 'tenants-'));
    const key = 'k'.repeat(40);
    const tenants = join(dir, 'tenants.json');
    writeFileSync(tenants, JSON.stringify([{ namespace: 'ns', name: 'demo', models: ['m'], keys: [key] }]));
    try {
      const { url, proc, exited } = await startGateway(upstream, ['--auth', 'keys', '--tenants', tenants]);
      const denied = await fetch(`${url}/v1/models`);
      expect(denied.status).toBe(401);
      expect(await denied.json()).toMatchObject({ error: { code: 'GW_UNAUTHORIZED' } });
      const allowed = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
      expect(allowed.status).toBe(200);
      proc.kill('SIGTERM');
      await exited;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
