// Whether another namespace served this Deployment's model name first (issue 30 item 6).
// The gateway keeps a served name per namespace: each namespace's tenants reach their own
// Deployment, and an open gateway asks the client to name the namespace
// (gateway/src/discovery/build-table.ts). What a platform engineer should see on the
// younger Deployment is that its name is ambiguous for open clients, and since when: the
// ServedNameShared condition, set here on every Deployment that some Deployment of
// another namespace serving the same name is older than (creationTimestamp, then
// namespace/name, as the gateway orders them), and removed when none is. Pure.
import type { DeploymentResource } from '#api';

export const SERVED_NAME_SHARED = 'ServedNameShared';
export const SERVED_FIRST_ELSEWHERE = 'ServedFirstElsewhere';

/** What the operator's cache holds of a Deployment: only these fields are read. */
export interface ServedNameClaim {
  readonly metadata?: {
    readonly namespace?: string | undefined;
    readonly name?: string | undefined;
    readonly creationTimestamp?: Date | string | undefined;
    readonly deletionTimestamp?: Date | string | undefined;
  };
  readonly spec?: { readonly model?: { readonly servedName?: string } };
}

export interface SharedNameVerdict {
  readonly reason: typeof SERVED_FIRST_ELSEWHERE;
  readonly message: string;
}

/** The oldest claim of `root`'s served name in another namespace, when it is older than `root`. */
export function findEarlierClaimElsewhere(
  root: DeploymentResource,
  all: readonly ServedNameClaim[],
): SharedNameVerdict | undefined {
  const name = root.spec.model.servedName;
  const ns = root.metadata.namespace ?? '';
  const mine = ageKey(root);
  const earlier = all
    .filter(
      (d) =>
        d.spec?.model?.servedName === name &&
        (d.metadata?.namespace ?? '') !== ns &&
        !d.metadata?.deletionTimestamp &&
        compareKeys(ageKey(d), mine) < 0,
    )
    .sort((a, b) => compareKeys(ageKey(a), ageKey(b)));
  const first = earlier[0];
  if (!first) return undefined;
  const others = [...new Set(earlier.map((d) => d.metadata?.namespace ?? ''))].sort();
  const where = `${first.metadata?.namespace ?? ''}/${first.metadata?.name ?? ''}`;
  return {
    reason: SERVED_FIRST_ELSEWHERE,
    message:
      `served name '${name}' was served first in namespace${others.length > 1 ? 's' : ''} ${others.join(', ')} ` +
      `(Deployment ${where}): this namespace's tenants still reach this Deployment, but an open gateway ` +
      `answers 409 GW_MODEL_AMBIGUOUS unless the client sends x-cacheroute-namespace; give ` +
      `spec.model.servedName a name of its own to end the ambiguity`,
  };
}

type AgeKey = readonly [string, string];

function ageKey(d: ServedNameClaim): AgeKey {
  const created = d.metadata?.creationTimestamp;
  const at = created instanceof Date ? created.toISOString().replace(/\.\d{3}Z$/, 'Z') : (created ?? '');
  return [at, `${d.metadata?.namespace ?? ''}/${d.metadata?.name ?? ''}`];
}

function compareKeys(a: AgeKey, b: AgeKey): number {
  const cmp = (x: string, y: string): number => (x < y ? -1 : x > y ? 1 : 0);
  return cmp(a[0], b[0]) || cmp(a[1], b[1]);
}

/** The Deployments of other namespaces that serve `d`'s name: whose ServedNameShared it may change. */
export function mapSameServedName(
  d: ServedNameClaim,
  all: readonly ServedNameClaim[],
): { namespace: string; name: string }[] {
  const name = d.spec?.model?.servedName;
  const ns = d.metadata?.namespace ?? '';
  if (name === undefined) return [];
  return all
    .filter((o) => o.spec?.model?.servedName === name && (o.metadata?.namespace ?? '') !== ns)
    .map((o) => ({ namespace: o.metadata?.namespace ?? '', name: o.metadata?.name ?? '' }));
}
