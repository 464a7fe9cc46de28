import { DEPLOYMENT_LABEL, RESERVED_ENV_PREFIX, type EndpointRole } from '#api';

export const LABEL_DEPLOYMENT = DEPLOYMENT_LABEL;
export const LABEL_DEPLOYMENT_ID = 'cacheroute.dev/deployment-id';
export const LABEL_ROLE = 'cacheroute.dev/role';
export const LABEL_FINGERPRINT = 'cacheroute.dev/fingerprint';
export const ANNOTATION_FINGERPRINT = 'cacheroute.dev/fingerprint';
export const MANAGED_BY = 'cacheroute-operator';
/**
 * The SGLang container's env var holding its API key (from the runtime key Secret); args name it as
 * `$(…)`. Under the prefix the API keeps from runtime.env, so no user variable can shadow it.
 */
export const RUNTIME_API_KEY_ENV = `${RESERVED_ENV_PREFIX}RUNTIME_API_KEY`;

/** Selector labels: stable for the workload's life (a selector is immutable), so no fingerprint. */
export function buildSelectorLabels(name: string, role: EndpointRole): Record<string, string> {
  return { [LABEL_DEPLOYMENT]: name, [LABEL_ROLE]: role };
}

export function buildPodLabels(
  name: string,
  role: EndpointRole,
  deploymentId: string,
  fingerprint: string,
  sglangVersion: string,
): Record<string, string> {
  return {
    'app.kubernetes.io/name': 'sglang',
    'app.kubernetes.io/version': sglangVersion,
    'app.kubernetes.io/instance': name,
    'app.kubernetes.io/component': role,
    'app.kubernetes.io/part-of': 'cacheroute',
    'app.kubernetes.io/managed-by': MANAGED_BY,
    ...buildSelectorLabels(name, role),
    [LABEL_DEPLOYMENT_ID]: deploymentId,
    [LABEL_FINGERPRINT]: fingerprint,
  };
}

/** Deterministic workload names: one per engine role. */
export function buildWorkloadName(name: string, role: EndpointRole): string {
  return role === 'standalone' ? `${name}-sglang` : `${name}-${role}`;
}
