// Who may call the metrics API: the API server's aggregator, which proxies an
// authenticated user's request with a client certificate of its front-proxy
// CA and names the user in headers. The CA, the certificate names it may use
// and the header names are what the API server publishes in
// kube-system/extension-apiserver-authentication, as every aggregated API
// server reads them (k8s.io/apiserver's requestheader options).
import { z } from 'zod';

export const AUTH_CONFIGMAP = { namespace: 'kube-system', name: 'extension-apiserver-authentication' };

export interface FrontProxyConfig {
  /** PEM: the CA the aggregator's client certificate is signed by. */
  readonly clientCa: string;
  /** Common names the certificate may have; empty: any signed by the CA. */
  readonly allowedNames: readonly string[];
  readonly usernameHeaders: readonly string[];
  readonly groupHeaders: readonly string[];
}

const JsonStringList = z
  .string()
  .transform((text, ctx) => {
    try {
      return z.array(z.string()).parse(JSON.parse(text));
    } catch {
      ctx.addIssue({ code: 'custom', message: 'not a JSON list of strings' });
      return z.NEVER;
    }
  })
  .optional();

const AuthConfigMapData = z.looseObject({
  'requestheader-client-ca-file': z.string().min(1).optional(),
  'requestheader-allowed-names': JsonStringList,
  'requestheader-username-headers': JsonStringList,
  'requestheader-group-headers': JsonStringList,
});

export function parseFrontProxyConfig(
  data: unknown,
): { ok: true; value: FrontProxyConfig } | { ok: false; error: string } {
  const parsed = AuthConfigMapData.safeParse(data ?? {});
  const where = `${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name}`;
  if (!parsed.success)
    return {
      ok: false,
      error: `${where}: ${parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`).join('; ')}`,
    };
  const d = parsed.data;
  const clientCa = d['requestheader-client-ca-file'];
  if (!clientCa)
    return {
      ok: false,
      error: `${where} has no requestheader-client-ca-file: start kube-apiserver with --requestheader-client-ca-file (and --proxy-client-cert-file) so that it can proxy to aggregated APIs`,
    };
  return {
    ok: true,
    value: {
      clientCa,
      allowedNames: d['requestheader-allowed-names'] ?? [],
      usernameHeaders: d['requestheader-username-headers'] ?? ['X-Remote-User'],
      groupHeaders: d['requestheader-group-headers'] ?? ['X-Remote-Group'],
    },
  };
}

export interface ProxiedUser {
  readonly name: string;
  readonly groups: readonly string[];
}

/** Each line of the named headers, whole (one header line per group, as the API server sends them). */
const headerLines = (
  headers: Readonly<Record<string, readonly string[] | undefined>>,
  name: string,
): string[] => [...(headers[name.toLowerCase()] ?? [])];

/**
 * The user the aggregator names, once its certificate checked out (`authorized` by the TLS layer
 * against the CA, `commonName` among the allowed): undefined when the caller is not the aggregator.
 */
export function readProxiedUser(
  cfg: FrontProxyConfig,
  peer: { authorized: boolean; commonName: string | undefined },
  headers: Readonly<Record<string, readonly string[] | undefined>>,
): { ok: true; value: ProxiedUser } | { ok: false; error: string } {
  if (!peer.authorized)
    return { ok: false, error: 'a client certificate of the API server front-proxy CA is required' };
  if (cfg.allowedNames.length > 0 && !cfg.allowedNames.includes(peer.commonName ?? ''))
    return {
      ok: false,
      error: `client certificate ${peer.commonName ?? '(no CN)'} is not an allowed front proxy`,
    };
  const name = cfg.usernameHeaders.flatMap((h) => headerLines(headers, h)).find((v) => v !== '');
  if (!name) return { ok: false, error: 'the proxied request names no user' };
  return {
    ok: true,
    value: {
      name,
      groups: cfg.groupHeaders.flatMap((h) => headerLines(headers, h)).filter((g) => g !== ''),
    },
  };
}
