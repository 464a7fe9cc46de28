// The contract between the operator, which keeps each Deployment's SGLang API
// keys, and the gateway, which sends them: one Secret per cacheroute
// Deployment, named after it and labelled so both can cache only these
// Secrets; one entry per identity fingerprint (the fingerprint pods report and
// status publishes), its value the key SGLang was started with (--api-key).

/** Every runtime key Secret carries it ("true"): the operator and the gateway list Secrets by it. */
export const RUNTIME_API_KEY_LABEL = 'cacheroute.dev/runtime-api-key';
/** The cacheroute Deployment a Secret (and every object the operator renders) belongs to. */
export const DEPLOYMENT_LABEL = 'cacheroute.dev/deployment';

/** The one Secret that holds a Deployment's runtime keys. */
export function buildRuntimeKeySecretName(deployment: string): string {
  return `${deployment}-runtime-api-key`;
}
