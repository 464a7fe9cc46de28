// Builders for policy tests.
import type { EndpointView, Policy, RouteInput } from '../../../gateway/src/policies/policy.ts';

export function buildEndpoint(id: string, over: Partial<EndpointView> = {}): EndpointView {
  return { id, inFlight: 0, queued: 0, generation: 'g1', ...over };
}

export function buildInput(
  id: string,
  tokens: readonly number[],
  over: Partial<RouteInput> = {},
): RouteInput {
  return { id, salt: '', tokens, now: 0, ...over };
}

export function range(from: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

/** select, then tell the policy it was routed; returns the chosen id. */
export function route(
  policy: Policy,
  endpoints: readonly EndpointView[],
  input: RouteInput,
): string | undefined {
  const i = policy.select(endpoints, input);
  if (i === undefined) return undefined;
  const endpoint = (endpoints[i] as EndpointView).id;
  policy.observe?.({ kind: 'routed', endpoint, input });
  return endpoint;
}
