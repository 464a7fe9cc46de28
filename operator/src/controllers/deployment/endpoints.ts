import type { Endpoint } from '#api';
import type { IdentityReadback } from './verify.ts';
import { SGLANG_PORT } from './args.ts';
import { EndpointReason } from './meta/endpoint-reasons.ts';
import type { PodView } from './meta/pod-view.ts';

/** How long a verification of a current-revision pod stands before it is read again. */
export const REVERIFY_AFTER_MS = 10 * 60_000;

/** What to do about one pod this pass; `fetch` means read its server_info and model_info. */
export type VerificationPlan =
  | { action: 'keep'; endpoint: Endpoint }
  | { action: 'fetch'; pod: PodView }
  | { action: 'settle'; endpoint: Endpoint };

function baseEndpoint(pod: PodView, bootstrapPort: number | undefined): Endpoint {
  return {
    pod: pod.name,
    ip: pod.ip ?? '',
    port: SGLANG_PORT,
    role: pod.role,
    ready: pod.ready,
    verified: false,
    fingerprint: pod.fingerprint,
    restartCount: pod.restartCount,
    ...(pod.role === 'prefill' && bootstrapPort !== undefined ? { bootstrapPort } : {}),
  };
}

/**
 * Decides per pod whether an earlier verification still stands. A verification
 * is tied to the pod's IP, restart count and fingerprint: a restarted container
 * is a new process and is read again. A pod of an older revision keeps an
 * earlier verification (it keeps serving during a rollout) but cannot be newly
 * verified: the spec it was rendered from is gone.
 */
export function planVerification(
  pod: PodView,
  previous: Endpoint | undefined,
  current: { fingerprint: string; bootstrapPort: number | undefined; nowMs: number },
): VerificationPlan {
  const base = baseEndpoint(pod, current.bootstrapPort);
  if (!pod.ready || !pod.ip) {
    return {
      action: 'settle',
      endpoint: { ...base, reason: EndpointReason.NotReady, message: 'pod is not Ready' },
    };
  }
  const sameProcess =
    previous !== undefined &&
    previous.verified &&
    previous.ip === pod.ip &&
    previous.restartCount === pod.restartCount &&
    previous.fingerprint === pod.fingerprint;
  const fresh =
    previous?.verifiedAt !== undefined && current.nowMs - Date.parse(previous.verifiedAt) < REVERIFY_AFTER_MS;
  const outdated = pod.fingerprint !== current.fingerprint;
  if (sameProcess && (fresh || outdated)) return { action: 'keep', endpoint: { ...previous, ready: true } };
  if (outdated) {
    return {
      action: 'settle',
      endpoint: {
        ...base,
        reason: EndpointReason.OutdatedRevision,
        message: `pod runs fingerprint ${pod.fingerprint}, the spec now renders ${current.fingerprint}`,
      },
    };
  }
  return { action: 'fetch', pod };
}

/**
 * A pod carrying the Deployment's labels whose controller chain does not lead to it
 * (ownership.ts): listed so that status shows it, never verified, never sent the key.
 */
export function buildUnownedEndpoint(
  pod: PodView,
  bootstrapPort: number | undefined,
  reason: string,
): Endpoint {
  return {
    ...baseEndpoint(pod, bootstrapPort),
    reason: EndpointReason.NotOwned,
    message: `not this Deployment's pod (${reason}): not verified, no API key sent`,
  };
}

/** Turns what the runtime reported into an endpoint; `mismatches` empty means verified. */
export function buildVerifiedEndpoint(
  pod: PodView,
  bootstrapPort: number | undefined,
  outcome: IdentityReadback,
  now: Date,
): Endpoint {
  const base = baseEndpoint(pod, bootstrapPort);
  if (!outcome.ok) {
    return { ...base, reason: EndpointReason.VerificationFailed, message: outcome.error };
  }
  const reported = { ...outcome.reported };
  if (outcome.mismatches !== '') {
    return { ...base, reported, reason: EndpointReason.IdentityMismatch, message: outcome.mismatches };
  }
  const events = outcome.events ? { events: outcome.events } : {};
  return { ...base, reported, verified: true, verifiedAt: now.toISOString(), ...events };
}
