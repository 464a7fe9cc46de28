// Test PKI for the control plane, as a real cluster has it: a serving CA and a client
// CA (kube-apiserver trusts client certificates signed by the latter; the user is the
// CN, the groups are the O attributes), plus the service-account signing key pair.
// Keys come from node:crypto; certificates from the openssl CLI (node cannot sign).
import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const VALID_DAYS = '7';

export interface CertPair {
  cert: string;
  key: string;
}

export interface Pki {
  dir: string;
  servingCa: CertPair;
  clientCa: CertPair;
  serving: CertPair;
  admin: CertPair;
  // The aggregation layer: kube-apiserver proxies to aggregated APIs with proxyClient,
  // signed by frontProxyCa, which those APIs trust (--requestheader-client-ca-file).
  frontProxyCa: CertPair;
  proxyClient: CertPair;
  serviceAccount: { publicKey: string; privateKey: string };
}

// Paths only depend on dir, so a later caller (createUserKubeconfig) finds the client CA.
export function pkiPaths(dir: string): Pki {
  const pair = (name: string): CertPair => ({
    cert: join(dir, `${name}.crt`),
    key: join(dir, `${name}.key`),
  });
  return {
    dir,
    servingCa: pair('serving-ca'),
    clientCa: pair('client-ca'),
    serving: pair('serving'),
    admin: pair('admin'),
    frontProxyCa: pair('front-proxy-ca'),
    proxyClient: pair('front-proxy-client'),
    serviceAccount: { publicKey: join(dir, 'sa.pub'), privateKey: join(dir, 'sa.key') },
  };
}

export async function createPki(
  dir: string,
  serving: { ips: readonly string[]; dnsNames: readonly string[] },
): Promise<Pki> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pki = pkiPaths(dir);
  const sa = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  writeFileSync(pki.serviceAccount.privateKey, sa.privateKey.export({ type: 'pkcs8', format: 'pem' }), {
    mode: 0o600,
  });
  writeFileSync(pki.serviceAccount.publicKey, sa.publicKey.export({ type: 'spki', format: 'pem' }));
  await Promise.all([
    createCa(dir, pki.servingCa, 'cacheroute-test-serving-ca'),
    createCa(dir, pki.clientCa, 'cacheroute-test-client-ca'),
    createCa(dir, pki.frontProxyCa, 'cacheroute-test-front-proxy-ca'),
  ]);
  const sans = [...serving.dnsNames.map((d) => `DNS:${d}`), ...serving.ips.map((ip) => `IP:${ip}`)];
  await Promise.all([
    issueCert(dir, pki.servingCa, pki.serving, '/CN=kube-apiserver', 'serverAuth', sans),
    issueCert(dir, pki.clientCa, pki.admin, subjectFor('admin', ['system:masters']), 'clientAuth', []),
    issueCert(dir, pki.frontProxyCa, pki.proxyClient, '/CN=front-proxy-client', 'clientAuth', []),
  ]);
  return pki;
}

// A client certificate for user/groups, signed by the client CA in dir.
export async function issueClientCert(
  dir: string,
  name: string,
  user: string,
  groups: readonly string[],
): Promise<CertPair> {
  const pair = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  await issueCert(dir, pkiPaths(dir).clientCa, pair, subjectFor(user, groups), 'clientAuth', []);
  return pair;
}

// A serving certificate signed by the serving CA in dir (an aggregated API's, for one).
export async function issueServingCert(
  dir: string,
  name: string,
  sans: { ips: readonly string[]; dnsNames: readonly string[] },
): Promise<CertPair> {
  const pair = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  const list = [...sans.dnsNames.map((d) => `DNS:${d}`), ...sans.ips.map((ip) => `IP:${ip}`)];
  await issueCert(dir, pkiPaths(dir).servingCa, pair, `/CN=${name}`, 'serverAuth', list);
  return pair;
}

function subjectFor(user: string, groups: readonly string[]): string {
  // openssl -subj separates RDNs with '/', and treats '+' and '=' specially.
  for (const part of [user, ...groups]) {
    if (!/^[A-Za-z0-9:._@-]+$/.test(part))
      throw new Error(`unsupported character in user or group ${JSON.stringify(part)}`);
  }
  return [...groups.map((g) => `/O=${g}`), `/CN=${user}`].join('');
}

function writeKey(path: string): void {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  writeFileSync(path, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
}

function writeConfig(dir: string, name: string, extensions: string): string {
  const path = join(dir, `${name}.cnf`);
  writeFileSync(path, `[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n[ext]\n${extensions}\n`);
  return path;
}

async function createCa(dir: string, ca: CertPair, cn: string): Promise<void> {
  writeKey(ca.key);
  const cnf = writeConfig(
    dir,
    `${cn}`,
    'basicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign,digitalSignature\nsubjectKeyIdentifier = hash',
  );
  await openssl([
    'req',
    '-x509',
    '-new',
    '-config',
    cnf,
    '-extensions',
    'ext',
    '-key',
    ca.key,
    '-subj',
    `/CN=${cn}`,
    '-days',
    VALID_DAYS,
    '-out',
    ca.cert,
  ]);
}

async function issueCert(
  dir: string,
  ca: CertPair,
  out: CertPair,
  subject: string,
  usage: 'serverAuth' | 'clientAuth',
  sans: readonly string[],
): Promise<void> {
  writeKey(out.key);
  const base = out.cert.replace(/\.crt$/, '');
  const ext = [
    'basicConstraints = critical,CA:FALSE',
    'keyUsage = critical,digitalSignature,keyEncipherment',
    `extendedKeyUsage = ${usage}`,
    'authorityKeyIdentifier = keyid',
    ...(sans.length > 0 ? [`subjectAltName = ${sans.join(',')}`] : []),
  ].join('\n');
  const cnf = writeConfig(dir, base.slice(dir.length + 1), ext);
  const csr = `${base}.csr`;
  await openssl(['req', '-new', '-config', cnf, '-key', out.key, '-subj', subject, '-out', csr]);
  await openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    '-set_serial',
    `0x${randomBytes(12).toString('hex')}`,
    '-days',
    VALID_DAYS,
    '-extfile',
    cnf,
    '-extensions',
    'ext',
    '-out',
    out.cert,
  ]);
}

async function openssl(args: readonly string[]): Promise<void> {
  try {
    await run('openssl', args);
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr ?? '';
    throw new Error(`openssl ${args.slice(0, 2).join(' ')} failed: ${stderr.trim()}`, { cause: err });
  }
}
