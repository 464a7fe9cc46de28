// Whether a fetched source's endpoint may be used (issue 30): the fetcher sends the hub
// token as `Authorization: Bearer` and object-store credentials sign its requests, to an
// endpoint the Deployment's author chose. Over plain HTTP anyone on the path reads the
// token, so an http:// endpoint is refused unless its host is one the operator's admin
// listed (--insecure-endpoint-hosts: an in-cluster MinIO or mirror on a trusted network).
// Pure: the spec and the list in, a refusal message or nothing out.
import type { DeploymentSpec } from '#api';

/** Why the source's endpoint is refused; undefined: it may be used. */
export function refuseInsecureEndpoint(
  spec: DeploymentSpec,
  insecureHosts: readonly string[],
): string | undefined {
  const source = spec.model.source;
  const [field, endpoint] = source.download
    ? ['download', source.download.endpoint]
    : source.objectStore
      ? ['objectStore', source.objectStore.endpoint]
      : [undefined, undefined];
  if (field === undefined || endpoint === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return undefined; // The API's own rules refuse a malformed URL with their message.
  }
  if (url.protocol !== 'http:') return undefined;
  const host = url.hostname.toLowerCase();
  if (insecureHosts.some((h) => h.toLowerCase() === host)) return undefined;
  // SigV4 keeps the secret key off the wire, but the access key id, a session token and
  // replayable signed requests are on it.
  const secret =
    field === 'download' ? 'the hub token' : "the store's access key id, session token and signed requests";
  return (
    `model.source.${field}.endpoint ${endpoint} is plain HTTP: ${secret} would cross the network in clear. ` +
    `Use https://, or have the operator's admin list ${host} in --insecure-endpoint-hosts ` +
    `(chart: operator.modelCache.insecureEndpointHosts)`
  );
}
