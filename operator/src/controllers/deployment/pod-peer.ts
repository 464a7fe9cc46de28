// The text form of a NetworkPolicy peer on the operator's command line:
// `namespace=<ns>[,<label>=<value>...]`, e.g.
// `namespace=cacheroute-system,app.kubernetes.io/component=gateway`: the pods
// of that namespace carrying every label given (all of them with none).
// Refused, with what to change, is anything the API server would refuse in a
// NetworkPolicy: a namespace or label that is not one.
import type { PodPeer } from './network-policy.ts';

export type ParsedPodPeer = { ok: true; value: PodPeer } | { ok: false; error: string };

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

function isLabelKey(key: string): boolean {
  const slash = key.indexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  const prefixOk = prefix === undefined || (prefix.length <= 253 && DNS_SUBDOMAIN.test(prefix));
  return prefixOk && name.length <= 63 && LABEL_NAME.test(name);
}

function isLabelValue(value: string): boolean {
  return value === '' || (value.length <= 63 && LABEL_NAME.test(value));
}

export function parsePodPeer(text: string): ParsedPodPeer {
  let namespace: string | undefined;
  const podLabels: Record<string, string> = {};
  for (const item of text.split(',').map((i) => i.trim())) {
    const eq = item.indexOf('=');
    if (eq <= 0)
      return { ok: false, error: `${JSON.stringify(item)} is not KEY=VALUE (namespace=NS,LABEL=VALUE,...)` };
    const key = item.slice(0, eq);
    const value = item.slice(eq + 1);
    if (key === 'namespace') {
      if (namespace !== undefined) return { ok: false, error: 'namespace= is given twice' };
      if (value.length > 63 || !DNS_LABEL.test(value))
        return { ok: false, error: `${JSON.stringify(value)} is not a namespace name` };
      namespace = value;
      continue;
    }
    if (!isLabelKey(key)) return { ok: false, error: `${JSON.stringify(key)} is not a label key` };
    if (!isLabelValue(value))
      return { ok: false, error: `${JSON.stringify(value)} is not a label value (label ${key})` };
    if (key in podLabels) return { ok: false, error: `label ${key} is given twice` };
    podLabels[key] = value;
  }
  if (namespace === undefined)
    return {
      ok: false,
      error: 'no namespace=NS: name the namespace of the pods (namespace=NS,LABEL=VALUE,...)',
    };
  return { ok: true, value: { namespace, podLabels } };
}
