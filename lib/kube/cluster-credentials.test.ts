import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { InClusterCredentials, loadClusterCredentials } from './cluster-credentials.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'creds-'));
  dirs.push(d);
  return d;
}
function serviceAccountDir(token: string): string {
  const d = tempDir();
  writeFileSync(join(d, 'token'), `${token}\n`);
  writeFileSync(join(d, 'ca.crt'), 'CA PEM');
  return d;
}
function kubeconfigFile(context: string, server: string): string {
  const file = join(tempDir(), 'config');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: ${context}, cluster: {server: "${server}"}}]`,
      `users: [{name: ${context}, user: {token: abc}}]`,
      `contexts: [{name: ${context}, context: {cluster: ${context}, user: ${context}}}]`,
      `current-context: ${context}`,
    ].join('\n'),
  );
  return file;
}
const podEnv = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };

describe('InClusterCredentials', () => {
  it("addresses the API server from the pod's environment, an IPv6 host in brackets", () => {
    expect(InClusterCredentials.fromEnvironment(podEnv, '/sa').getCurrentCluster().server).toBe(
      'https://10.96.0.1:443',
    );
    const v6 = { KUBERNETES_SERVICE_HOST: 'fd00:10:96::1', KUBERNETES_SERVICE_PORT: '6443' };
    expect(InClusterCredentials.fromEnvironment(v6, '/sa').server).toBe('https://[fd00:10:96::1]:6443');
  });

  it('says what to pass when the environment is not a pod', () => {
    expect(() => InClusterCredentials.fromEnvironment({}, '/sa')).toThrow(/pass --kubeconfig/);
  });

  it('reads the token on every call, so a rotated token is used', async () => {
    const dir = serviceAccountDir('first');
    const creds = InClusterCredentials.fromEnvironment(podEnv, dir);
    const a: RequestOptions = {};
    await creds.applyToHTTPSOptions(a);
    expect(a.headers).toEqual({ Authorization: 'Bearer first' });
    expect(String(a.ca)).toBe('CA PEM');
    writeFileSync(join(dir, 'token'), 'second');
    const b: RequestOptions = { headers: { 'User-Agent': 'x' } };
    await creds.applyToHTTPSOptions(b);
    expect(b.headers).toEqual({ 'User-Agent': 'x', Authorization: 'Bearer second' });
    writeFileSync(join(dir, 'token'), '\n');
    const c: RequestOptions = {};
    await creds.applyToHTTPSOptions(c);
    expect(c.headers).toBeUndefined();
  });
});

describe('loadClusterCredentials', () => {
  it("uses the service account when there is no kubeconfig, without client-node's KubeConfig", async () => {
    const dir = serviceAccountDir('t');
    const creds = await loadClusterCredentials(undefined, {
      env: podEnv,
      home: tempDir(),
      serviceAccountDir: dir,
    });
    expect(creds).toBeInstanceOf(InClusterCredentials);
    expect(creds.getCurrentCluster()?.server).toBe('https://10.96.0.1:443');
  });

  it('prefers a kubeconfig file to the service account', async () => {
    const file = kubeconfigFile('x', 'https://example.test:6443');
    const creds = await loadClusterCredentials(file, {
      env: podEnv,
      serviceAccountDir: serviceAccountDir('t'),
    });
    expect(creds).not.toBeInstanceOf(InClusterCredentials);
    expect(creds.getCurrentCluster()?.server).toBe('https://example.test:6443');
  });

  it('merges the files $KUBECONFIG lists, the first current context winning', async () => {
    const a = kubeconfigFile('a', 'https://a.test:6443');
    const b = kubeconfigFile('b', 'https://b.test:6443');
    const creds = await loadClusterCredentials(undefined, {
      env: { ...podEnv, KUBECONFIG: `${a}${delimiter}${delimiter}${b}` },
      home: tempDir(),
      serviceAccountDir: serviceAccountDir('t'),
    });
    expect(creds.getCurrentCluster()?.server).toBe('https://a.test:6443');
    const kc = creds as unknown as { getContexts(): { name: string }[] };
    expect(kc.getContexts().map((c) => c.name)).toEqual(['a', 'b']);
  });

  it('reads ~/.kube/config before the service account', async () => {
    const home = tempDir();
    const file = kubeconfigFile('h', 'https://home.test:6443');
    mkdirSync(join(home, '.kube'));
    writeFileSync(join(home, '.kube', 'config'), readFileSync(file));
    const creds = await loadClusterCredentials(undefined, {
      env: podEnv,
      home,
      serviceAccountDir: serviceAccountDir('t'),
    });
    expect(creds.getCurrentCluster()?.server).toBe('https://home.test:6443');
  });

  it("names the service account when the pod's environment lacks the API server", async () => {
    await expect(
      loadClusterCredentials(undefined, {
        env: {},
        home: tempDir(),
        serviceAccountDir: serviceAccountDir('t'),
      }),
    ).rejects.toThrow(/^cannot use the pod's service account: KUBERNETES_SERVICE_HOST/);
  });

  it('says what to pass when there is neither', async () => {
    await expect(
      loadClusterCredentials(undefined, { env: {}, home: tempDir(), serviceAccountDir: tempDir() }),
    ).rejects.toThrow(/pass --kubeconfig <file>, set \$KUBECONFIG, or run in a pod/);
  });

  it('names the file it could not read', async () => {
    await expect(loadClusterCredentials('/nonexistent/kubeconfig', { env: {} })).rejects.toThrow(
      /cannot load the kubeconfig: .*nonexistent/,
    );
  });
});

describe("the gateway's and the operator's entry points", () => {
  // client-node's module graph holds the whole generated API (ADR 0012); in a pod neither
  // process needs it, so importing them must not load it.
  it('do not load @kubernetes/client-node until a kubeconfig is read', async () => {
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const hook = join(tempDir(), 'hook.mjs');
    writeFileSync(
      hook,
      `import { registerHooks } from 'node:module';
registerHooks({ resolve(specifier, context, next) {
  const r = next(specifier, context);
  if (r.url.includes('@kubernetes/client-node')) process.stdout.write('LOADED ' + r.url + '\\n');
  return r;
} });`,
    );
    const run = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        hook,
        '--input-type=module',
        '-e',
        `await import(${JSON.stringify(join(root, 'gateway/src/server.ts'))});
await import(${JSON.stringify(join(root, 'operator/src/main.ts'))});
process.stdout.write('IMPORTED\\n');`,
      ],
      { encoding: 'utf8', cwd: root, timeout: 60_000 },
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('IMPORTED\n');
  }, 60_000);
});
