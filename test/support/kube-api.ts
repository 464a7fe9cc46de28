// Minimal client-certificate HTTPS access to the test API server, and kubeconfig
// files for it. Used by the harness before any real client is involved.
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { stringify } from 'yaml';

export interface Credentials {
  server: string;
  caFile: string;
  certFile: string;
  keyFile: string;
}

export interface ApiResponse {
  status: number;
  body: string;
}

export function writeKubeconfig(path: string, creds: Credentials, user: string): void {
  const b64 = (file: string): string => readFileSync(file).toString('base64');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'cacheroute-test',
        cluster: { server: creds.server, 'certificate-authority-data': b64(creds.caFile) },
      },
    ],
    users: [
      {
        name: user,
        user: { 'client-certificate-data': b64(creds.certFile), 'client-key-data': b64(creds.keyFile) },
      },
    ],
    contexts: [{ name: user, context: { cluster: 'cacheroute-test', user } }],
    'current-context': user,
  };
  writeFileSync(path, stringify(config), { mode: 0o600 });
}

export async function apiRequest(
  creds: Credentials,
  method: string,
  path: string,
  body?: unknown,
  opts: { contentType?: string; timeoutMs?: number } = {},
): Promise<ApiResponse> {
  const url = new URL(path, creds.server);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        ca: readFileSync(creds.caFile),
        cert: readFileSync(creds.certFile),
        key: readFileSync(creds.keyFile),
        timeout: opts.timeoutMs ?? 10_000,
        headers: {
          accept: 'application/json',
          ...(payload === undefined
            ? {}
            : {
                'content-type': opts.contentType ?? 'application/json',
                'content-length': Buffer.byteLength(payload),
              }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${url.href}: timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

// Like apiRequest, but a non-2xx status is an error; returns the parsed JSON.
export async function apiJson<T>(
  creds: Credentials,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  const res = await apiRequest(creds, method, path, body);
  if (res.status < 200 || res.status >= 300) {
    throw new Error(`${method} ${path}: HTTP ${res.status}: ${res.body.slice(0, 500)}`);
  }
  return JSON.parse(res.body) as T;
}
