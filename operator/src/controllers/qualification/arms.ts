// Whether two Deployments make a matched pair, and where each is measured.
// Pure: from the Deployments as the informer holds them (spec and the
// operator's verified status). Any difference outside the declared subject is
// named, field by field, with both values: the user must see what to change.
import type { DeploymentResource } from '#api/resources.ts';
import type { QualificationSubject } from '#api/qualification.ts';
import { DEFAULT_BOOTSTRAP_PORT } from '#sglang/bootstrap.ts';

/** The prefill a disaggregated arm's requests also go to (its bootstrap server names it to the decode). */
export interface ArmPrefill {
  pod: string;
  url: string;
  bootstrapHost: string;
  bootstrapPort: number;
}

/** Where an arm is measured: a standalone endpoint, or a decode endpoint with its prefill. */
export interface ArmEndpoint {
  pod: string;
  url: string;
  prefill?: ArmPrefill;
}

/** One arm as the protocol needs it: identity held for the run, one endpoint, GPUs of that replica. */
export interface ArmView {
  deploymentId: string;
  fingerprint: string;
  profile: string;
  endpoint: ArmEndpoint;
  /** GPUs of the measured replica (pods x GPUs a pod; a prefill/decode pair counts both), for the GPU-hours line. */
  gpus: number;
}

export type ArmsCheck =
  | { kind: 'ready'; arms: [ArmView, ArmView] }
  /** Not yet measurable (verifying, no ready endpoint): wait, it is not the user's mistake. */
  | { kind: 'waiting'; message: string }
  /** A difference the user did not declare: refuse, naming every one. */
  | { kind: 'mismatch'; differences: string[] };

type Status = NonNullable<DeploymentResource['status']>;

function imageDigestOf(d: DeploymentResource): string {
  return d.status?.identity?.imageDigest ?? d.spec.runtime.image.replace(/^.*@/, '');
}

function gpusOf(d: DeploymentResource): number {
  const p = d.spec.parallelism;
  const perPod = (gpus: number | undefined) => (gpus ?? Math.ceil(p.tensor / p.nodes)) * p.nodes;
  const pd = d.spec.disaggregation;
  if (!pd) return perPod(d.spec.resources.gpus);
  return (
    perPod(pd.prefill.resources?.gpus ?? d.spec.resources.gpus) +
    perPod(pd.decode.resources?.gpus ?? d.spec.resources.gpus)
  );
}

/** A disaggregated Deployment's pairing and per-part hardware: never a cache subject. */
function pdShape(d: DeploymentResource): unknown {
  const pd = d.spec.disaggregation;
  if (!pd) return null;
  return {
    transferBackend: pd.transferBackend ?? null,
    ibDevice: pd.ibDevice ?? null,
    prefillResources: pd.prefill.resources ?? null,
    decodeResources: pd.decode.resources ?? null,
  };
}

/** The fields that must agree, by name; a subject lifts its own group. */
function comparedFields(
  d: DeploymentResource,
  subject: readonly QualificationSubject[],
): Record<string, unknown> {
  const s = d.spec;
  const fields: Record<string, unknown> = {
    'model.digest': d.status?.identity?.modelDigest ?? s.model.digest,
    'model.tokenizerDigest': d.status?.identity?.tokenizerDigest ?? s.model.tokenizerDigest,
    'runtime.image digest': imageDigestOf(d),
    'runtime.version': s.runtime.version,
    'runtime.env': s.runtime.env ?? [],
    'topology: parallelism': s.parallelism,
    'topology: disaggregated': s.disaggregation !== undefined,
    'topology: disaggregation transfer and part resources': pdShape(d),
    'hardware: resources': { ...s.resources, gpus: gpusOf(d) / s.parallelism.nodes },
    'hardware: scheduling.nodeSelector': s.scheduling?.nodeSelector ?? {},
  };
  if (!subject.includes('Profile')) {
    fields['profile'] = s.profile ?? 'dense';
    fields['radixCache'] = s.radixCache ?? null;
    fields['hicache'] = s.hicache ?? null;
    fields['hisparse'] = s.hisparse ?? null;
    fields['disaggregation'] = s.disaggregation ?? null;
  }
  if (!subject.includes('Serving')) fields['serving'] = s.serving ?? {};
  if (!subject.includes('RuntimeArgs')) fields['runtime.extraArgs'] = s.runtime.extraArgs ?? [];
  return fields;
}

/** JSON with sorted keys, so two equal objects print the same. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

export function listDifferences(
  names: readonly [string, string],
  a: DeploymentResource,
  b: DeploymentResource,
  subject: readonly QualificationSubject[],
): string[] {
  const fa = comparedFields(a, subject);
  const fb = comparedFields(b, subject);
  return Object.keys(fa)
    .filter((k) => canonical(fa[k]) !== canonical(fb[k]))
    .map((k) => `${k}: ${names[0]}=${canonical(fa[k])} ${names[1]}=${canonical(fb[k])}`);
}

function urlOf(ip: string, port: number): string {
  return `http://${ip.includes(':') ? `[${ip}]` : ip}:${port}`;
}

/**
 * The first (by pod name) ready, verified endpoint of the current identity: a
 * standalone one, or for a disaggregated Deployment the first decode paired with
 * the first prefill (every endpoint here has the identity's fingerprint, the
 * gateway's pairing rule: a pair never mixes identities).
 */
function viewOf(name: string, d: DeploymentResource): ArmView | string {
  const status: Status | undefined = d.status;
  const identity = status?.identity;
  if (!identity || identity.deploymentId !== d.spec.deploymentId)
    return `Deployment ${name} has not yet verified deploymentId ${d.spec.deploymentId}`;
  const first = (role: string) =>
    (status.endpoints ?? [])
      .filter((e) => e.ready && e.verified && e.fingerprint === identity.fingerprint && e.ip !== '')
      .filter((e) => e.role === role)
      .sort((x, y) => x.pod.localeCompare(y.pod))[0];
  const view = (endpoint: ArmEndpoint): ArmView => ({
    deploymentId: identity.deploymentId,
    fingerprint: identity.fingerprint,
    profile: status.profile ?? d.spec.profile ?? 'dense',
    endpoint,
    gpus: gpusOf(d),
  });
  if (d.spec.disaggregation) {
    const prefill = first('prefill');
    const decode = first('decode');
    if (!prefill || !decode) return `Deployment ${name} has no ready, verified prefill/decode pair`;
    return view({
      pod: decode.pod,
      url: urlOf(decode.ip, decode.port),
      prefill: {
        pod: prefill.pod,
        url: urlOf(prefill.ip, prefill.port),
        bootstrapHost: prefill.ip,
        bootstrapPort: prefill.bootstrapPort ?? DEFAULT_BOOTSTRAP_PORT,
      },
    });
  }
  const endpoint = first('standalone');
  if (!endpoint) return `Deployment ${name} has no ready, verified standalone endpoint`;
  return view({ pod: endpoint.pod, url: urlOf(endpoint.ip, endpoint.port) });
}

export function checkArms(
  arms: readonly [{ name: string; deployment: string }, { name: string; deployment: string }],
  deployments: readonly [DeploymentResource | undefined, DeploymentResource | undefined],
  subject: readonly QualificationSubject[],
): ArmsCheck {
  const [da, db] = deployments;
  const missing = arms.filter((_, i) => !deployments[i]).map((a) => `Deployment ${a.deployment} not found`);
  if (!da || !db) return { kind: 'waiting', message: missing.join('; ') };
  const names = [arms[0].name, arms[1].name] as const;
  const differences = listDifferences(names, da, db, subject);
  if (differences.length > 0) return { kind: 'mismatch', differences };
  const va = viewOf(arms[0].deployment, da);
  const vb = viewOf(arms[1].deployment, db);
  if (typeof va === 'string' || typeof vb === 'string')
    return { kind: 'waiting', message: [va, vb].filter((v) => typeof v === 'string').join('; ') };
  return { kind: 'ready', arms: [va, vb] };
}
