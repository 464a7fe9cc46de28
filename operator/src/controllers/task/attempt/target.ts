// Where a Task runs and under which identity, from what the cluster says.
//
// SGLang: only verified, ready endpoints whose rendered fingerprint is the
// Deployment's current identity fingerprint, and only while the Deployment
// status says it is routable for the spec's current deploymentId. A
// disaggregated target yields prefill/decode pairs of one fingerprint (the
// gateway's pairing rule: a pair never mixes identities).
// OpenRouter: the base URL is the operator's flag, never a Task field.
import type { DeploymentResource } from '#api/resources.ts';
import type { TaskSpec } from '#api/task.ts';
import type { OpenRouterIdentity, ProviderIdentity, SglangIdentity, VerifiedRuntime } from './fingerprint.ts';
import { TaskReason } from './reasons.ts';
import { DEFAULT_BOOTSTRAP_PORT } from '#sglang/bootstrap.ts';
import { err, ok, type AttemptError, type Result } from './types.ts';

/** Why an OpenRouter Task cannot run where the operator was not allowed paid calls. */
export const PAID_CALLS_OFF =
  "paid calls are off: the operator runs without --allow-paid-calls=true (the chart's operator.allowPaidCalls)";

export interface PdPrefill {
  url: string;
  bootstrapHost: string;
  bootstrapPort: number;
}

export type SglangRoute =
  { kind: 'standalone'; urls: string[] } | { kind: 'pd'; prefill: PdPrefill[]; decode: string[] };

export type TaskTarget =
  | { provider: 'sglang'; identity: SglangIdentity; route: SglangRoute }
  | { provider: 'openrouter'; identity: OpenRouterIdentity };

export interface TargetObservations {
  /** The Deployment spec.target.deployment names, when it exists. */
  deployment?: DeploymentResource | undefined;
  /** The cache_salt the gateway stamps for this Deployment (CachePolicy status or the namespace default). */
  cacheSalt?: string | undefined;
  /** The operator's --openrouter-base-url, when it runs with --allow-paid-calls=true. */
  openrouterBaseUrl?: string | undefined;
}

function notRoutable(message: string, code = 'NotRoutable'): { ok: false; error: AttemptError } {
  return err({ reason: TaskReason.TargetNotRoutable, code, message });
}

function urlOf(ip: string, port: number): string {
  return `http://${ip.includes(':') ? `[${ip}]` : ip}:${port}`;
}

function sameRuntime(a: VerifiedRuntime, b: VerifiedRuntime): boolean {
  return (
    a.modelPath === b.modelPath &&
    a.servedModelName === b.servedModelName &&
    a.tokenizerPath === b.tokenizerPath &&
    a.version === b.version &&
    a.tensorParallel === b.tensorParallel
  );
}

type DeploymentStatus = NonNullable<DeploymentResource['status']>;
type DeploymentIdentity = NonNullable<DeploymentStatus['identity']>;
type EndpointStatus = NonNullable<DeploymentStatus['endpoints']>[number];

/** The Deployment's verified identity, while it exists, is current and says it is routable. */
function checkRoutable(
  name: string,
  d: DeploymentResource | undefined,
): Result<{ deployment: DeploymentResource; identity: DeploymentIdentity }, AttemptError> {
  if (!d) return notRoutable(`Deployment ${name} not found`, 'NotFound');
  if (d.metadata.deletionTimestamp) return notRoutable(`Deployment ${name} is being deleted`, 'Deleting');
  const status = d.status;
  const identity = status?.identity;
  if (!identity || identity.deploymentId !== d.spec.deploymentId)
    return notRoutable(
      `Deployment ${name} has not yet verified deploymentId ${d.spec.deploymentId}`,
      'IdentityPending',
    );
  if (status.routable?.value !== true)
    return notRoutable(
      `Deployment ${name} is not routable: ${status.routable?.reason ?? 'Unknown'}${status.routable?.message ? ` (${status.routable.message})` : ''}`,
      status.routable?.reason ?? 'Unknown',
    );
  return ok({ deployment: d, identity });
}

/** The one runtime every eligible endpoint reports. */
function agreedRuntime(
  name: string,
  eligible: readonly EndpointStatus[],
): Result<VerifiedRuntime, AttemptError> {
  const runtimes: VerifiedRuntime[] = eligible.map((e) => ({
    modelPath: e.reported?.modelPath ?? '',
    servedModelName: e.reported?.servedModelName ?? '',
    tokenizerPath: e.reported?.tokenizerPath ?? '',
    version: e.reported?.version ?? '',
    tensorParallel: e.reported?.tensorParallel ?? 1,
  }));
  const runtime = runtimes[0];
  if (!runtime)
    return notRoutable(`Deployment ${name} has no verified endpoint of its current identity`, 'NoEndpoint');
  if (!runtimes.every((r) => sameRuntime(r, runtime)))
    return notRoutable(
      `Deployment ${name} endpoints report different runtime identities`,
      'IdentityMismatch',
    );
  return ok(runtime);
}

/** Standalone endpoints, or prefill/decode pairs for a disaggregated Deployment. */
function planSglangRoute(
  name: string,
  disaggregated: boolean,
  eligible: readonly EndpointStatus[],
): Result<SglangRoute, AttemptError> {
  const byRole = (role: string) => eligible.filter((e) => e.role === role);
  if (disaggregated) {
    const prefill = byRole('prefill').map((e) => ({
      url: urlOf(e.ip, e.port),
      bootstrapHost: e.ip,
      bootstrapPort: e.bootstrapPort ?? DEFAULT_BOOTSTRAP_PORT,
    }));
    const decode = byRole('decode').map((e) => urlOf(e.ip, e.port));
    if (prefill.length === 0 || decode.length === 0)
      return notRoutable(`Deployment ${name} has no verified prefill/decode pair`, 'NoEndpoint');
    return ok({ kind: 'pd', prefill, decode });
  }
  const urls = byRole('standalone').map((e) => urlOf(e.ip, e.port));
  if (urls.length === 0) return notRoutable(`Deployment ${name} has no verified endpoint`, 'NoEndpoint');
  return ok({ kind: 'standalone', urls });
}

export function computeSglangTarget(
  name: string,
  obs: TargetObservations,
): Result<Extract<TaskTarget, { provider: 'sglang' }>, AttemptError> {
  const routable = checkRoutable(name, obs.deployment);
  if (!routable.ok) return routable;
  const { deployment: d, identity } = routable.value;
  if (!obs.cacheSalt) return notRoutable(`no cache salt resolved for Deployment ${name}`, 'NoCacheSalt');
  const eligible = (d.status?.endpoints ?? []).filter(
    (e) => e.ready && e.verified && e.fingerprint === identity.fingerprint && e.ip !== '',
  );
  const runtime = agreedRuntime(name, eligible);
  if (!runtime.ok) return runtime;
  const route = planSglangRoute(name, Boolean(d.spec.disaggregation), eligible);
  if (!route.ok) return route;
  return ok({
    provider: 'sglang',
    identity: {
      provider: 'sglang',
      deploymentId: identity.deploymentId,
      identityFingerprint: identity.fingerprint,
      cacheSalt: obs.cacheSalt,
      runtime: runtime.value,
    },
    route: route.value,
  });
}

export function computeTaskTarget(
  spec: Pick<TaskSpec, 'target'>,
  obs: TargetObservations,
): Result<TaskTarget, AttemptError> {
  const { deployment, openrouter } = spec.target;
  if (deployment) return computeSglangTarget(deployment.name, obs);
  if (openrouter) {
    if (!obs.openrouterBaseUrl) return notRoutable(PAID_CALLS_OFF, 'PaidCallsNotAllowed');
    return ok({
      provider: 'openrouter',
      identity: {
        provider: 'openrouter',
        baseUrl: obs.openrouterBaseUrl,
        model: openrouter.model,
        upstreamProvider: openrouter.upstreamProvider,
        cacheWriteUsage: openrouter.cacheWriteUsage,
        inputTokenUpperBound: openrouter.inputTokenUpperBound,
      },
    });
  }
  return notRoutable('spec.target names neither a deployment nor openrouter', 'NoTarget');
}

export function isSglangIdentity(i: ProviderIdentity): i is SglangIdentity {
  return i.provider === 'sglang';
}
