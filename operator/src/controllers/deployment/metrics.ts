// Deployments in Prometheus, read from the informer's cache at scrape time: which
// identity each one serves (deploymentId, fingerprint: so any series labelled by
// deployment joins to its identity), and its endpoints by role and state as the
// operator sees them. Labels match the gateway's and the SGLang PodMonitor's:
// deployment is namespace/name.

import { Gauge, type Registry } from 'prom-client';

/** What the metrics read of a Deployment, as the informer holds it (not validated: read defensively). */
export interface DeploymentLike {
  readonly metadata?:
    { readonly namespace?: string | undefined; readonly name?: string | undefined } | undefined;
  readonly spec?: { readonly deploymentId?: string | undefined } | undefined;
  readonly status?:
    | {
        readonly identity?: { readonly deploymentId?: string; readonly fingerprint?: string } | undefined;
        readonly endpoints?:
          | readonly { readonly role?: string; readonly ready?: boolean; readonly verified?: boolean }[]
          | undefined;
        readonly conditions?:
          | readonly { readonly type?: string; readonly status?: string; readonly reason?: string }[]
          | undefined;
        readonly cache?: { readonly hitRate?: number | undefined } | undefined;
      }
    | undefined;
}

export interface DeploymentMetricsSource {
  list(): readonly DeploymentLike[];
}

type EndpointState = 'verified' | 'unverified' | 'not_ready';

const stateOf = (e: { ready?: boolean; verified?: boolean }): EndpointState =>
  !e.ready ? 'not_ready' : e.verified ? 'verified' : 'unverified';

export function registerDeploymentMetrics(registry: Registry, source: DeploymentMetricsSource): void {
  const key = (d: DeploymentLike): string => `${d.metadata?.namespace ?? ''}/${d.metadata?.name ?? ''}`;
  new Gauge({
    name: 'cacheroute_deployment_info',
    help:
      'One series per Deployment: the identity it was accepted with (deployment_id, fingerprint; empty ' +
      'before the first reconcile) and whether it is Ready. Join other series on deployment to get them.',
    labelNames: ['deployment', 'deployment_id', 'fingerprint', 'ready'],
    registers: [registry],
    collect() {
      this.reset();
      for (const d of source.list()) {
        const ready = d.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
        this.set(
          {
            deployment: key(d),
            deployment_id: d.status?.identity?.deploymentId ?? d.spec?.deploymentId ?? '',
            fingerprint: d.status?.identity?.fingerprint ?? '',
            ready: String(ready),
          },
          1,
        );
      }
    },
  });
  new Gauge({
    name: 'cacheroute_deployment_endpoints',
    help: "A Deployment's endpoints by role and state as the operator verified them (verified, unverified, not_ready).",
    labelNames: ['deployment', 'role', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const d of source.list()) {
        const counts = new Map<string, number>();
        for (const e of d.status?.endpoints ?? []) {
          const k = `${e.role ?? ''}\u0000${stateOf(e)}`;
          counts.set(k, (counts.get(k) ?? 0) + 1);
        }
        for (const [k, n] of counts) {
          const [role = '', state = ''] = k.split('\u0000');
          this.set({ deployment: key(d), role, state }, n);
        }
      }
    },
  });
  new Gauge({
    name: 'cacheroute_deployment_condition',
    help:
      "A Deployment's conditions (Ready, Progressing, IdentityVerified, Degraded, CacheHealthy): 1 per " +
      'condition, labelled with its status and reason.',
    labelNames: ['deployment', 'type', 'status', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const d of source.list())
        for (const c of d.status?.conditions ?? [])
          this.set(
            { deployment: key(d), type: c.type ?? '', status: c.status ?? '', reason: c.reason ?? '' },
            1,
          );
    },
  });
  new Gauge({
    name: 'cacheroute_deployment_cache_hit_rate',
    help: "The prefix cache hit rate a Deployment's runtimes report over the operator's window (status.cache).",
    labelNames: ['deployment'],
    registers: [registry],
    collect() {
      this.reset();
      for (const d of source.list()) {
        const rate = d.status?.cache?.hitRate;
        if (rate !== undefined) this.set({ deployment: key(d) }, rate);
      }
    },
  });
}
