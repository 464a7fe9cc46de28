// Whether two Deployments make a matched pair, and where each is measured.
// Pure: from the Deployments as the informer holds them (spec and the
// operator's verified status). Any difference outside the declared subject is
// named, field by field, with both values: the user must see what to change.
import type { DeploymentResource } from '#api/resources.ts';
import type { QualificationSubject } from '#api/qualification.ts';

export interface ArmEndpoint {
  pod: string;
  url: string;
}

/** One arm as the protocol needs it: identity held for the run, one endpoint, GPUs of that replica. */
export interface ArmView {
  deploymentId: string;
  fingerprint: string;
  profile: string;
  endpoint: ArmEndpoint;
  /** GPUs of the measured replica (pods x GPUs a pod), for the GPU-hours line. */
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
  return (d.spec.resources.gpus ?? Math.ceil(p.tensor / p.nodes)) * p.nodes;
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

/** The first (by pod name) ready, verified standalone endpoint of the current identity. */
function viewOf(name: string, d: DeploymentResource): ArmView | string {
  const status: Status | undefined = d.status;
  const identity = status?.identity;
  if (!identity || identity.deploymentId !== d.spec.deploymentId)
    return `Deployment ${name} has not yet verified deploymentId ${d.spec.deploymentId}`;
  const endpoint = (status.endpoints ?? [])
    .filter((e) => e.ready && e.verified && e.fingerprint === identity.fingerprint && e.ip !== '')
    .filter((e) => e.role === 'standalone')
    .sort((x, y) => x.pod.localeCompare(y.pod))[0];
  if (!endpoint) return `Deployment ${name} has no ready, verified standalone endpoint`;
  return {
    deploymentId: identity.deploymentId,
    fingerprint: identity.fingerprint,
    profile: status.profile ?? d.spec.profile ?? 'dense',
    endpoint: { pod: endpoint.pod, url: urlOf(endpoint.ip, endpoint.port) },
    gpus: gpusOf(d),
  };
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
  if (da.spec.disaggregation || db.spec.disaggregation)
    differences.push('topology: a prefill/decode Deployment is not qualified yet (standalone arms only)');
  if (differences.length > 0) return { kind: 'mismatch', differences };
  const va = viewOf(arms[0].deployment, da);
  const vb = viewOf(arms[1].deployment, db);
  if (typeof va === 'string' || typeof vb === 'string')
    return { kind: 'waiting', message: [va, vb].filter((v) => typeof v === 'string').join('; ') };
  return { kind: 'ready', arms: [va, vb] };
}
