// The gateway tier's members from its Service's EndpointSlices, as the Service
// itself sees them: an endpoint that is ready and not terminating receives
// traffic, so it takes a share; one that drains (terminating) gives its share
// back to the others at once. The request path reads a cached list; only the
// informer talks to the API server.
import { z } from 'zod';
import { Informer, type ListerWatcher } from '#kube/informer.ts';
import { noopLogger, type Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import type { PeerSet } from '../fleet/peers.ts';

const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

const Slice = z.looseObject({
  endpoints: z
    .array(
      z.looseObject({
        addresses: z.array(z.string()).default([]),
        conditions: z
          .looseObject({ ready: z.boolean().nullish(), terminating: z.boolean().nullish() })
          .optional(),
        targetRef: z.looseObject({ name: z.string().optional() }).optional(),
      }),
    )
    .nullish(),
});

/** The names (pod names, else addresses) of the endpoints that take traffic; pure. */
export function computeServingMembers(slices: readonly unknown[]): string[] {
  const out = new Set<string>();
  for (const raw of slices) {
    const slice = Slice.safeParse(raw);
    if (!slice.success) continue;
    for (const e of slice.data.endpoints ?? []) {
      // Kubernetes: an unset `ready` is unknown and counts as ready; terminating never takes new traffic.
      if (e.conditions?.ready === false || e.conditions?.terminating === true) continue;
      const name = e.targetRef?.name ?? e.addresses[0];
      if (name !== undefined) out.add(name);
    }
  }
  return [...out].sort();
}

/** Every endpoint's first address, ready or not, terminating or not (a draining replica still loads the runtimes); pure. */
export function computeTierAddresses(slices: readonly unknown[]): string[] {
  const out = new Set<string>();
  for (const raw of slices) {
    const slice = Slice.safeParse(raw);
    if (!slice.success) continue;
    for (const e of slice.data.endpoints ?? []) {
      const address = e.addresses[0];
      if (address !== undefined) out.add(address);
    }
  }
  return [...out].sort();
}

export interface EndpointSlicePeersOptions {
  readonly client: ListerWatcher;
  readonly namespace: string;
  /** The gateway's Service. */
  readonly service: string;
  readonly self: string;
  readonly logger?: Logger;
}

export class EndpointSlicePeers implements PeerSet {
  readonly self: string;
  readonly #informer: Informer<KubeObject>;
  #members: readonly string[] = [];
  #addresses: readonly string[] = [];

  constructor(opts: EndpointSlicePeersOptions) {
    this.self = opts.self;
    this.#informer = new Informer({
      client: opts.client,
      resource: Resources.endpointSlices,
      namespace: opts.namespace,
      labelSelector: `${SERVICE_NAME_LABEL}=${opts.service}`,
      logger: (opts.logger ?? noopLogger).child({ component: 'fleet' }),
    });
    const refresh = (): void => {
      const slices = this.#informer.list();
      this.#members = computeServingMembers(slices);
      this.#addresses = computeTierAddresses(slices);
    };
    this.#informer.addEventHandler({ onAdd: refresh, onUpdate: refresh, onDelete: refresh });
  }

  members(): readonly string[] {
    return this.#members;
  }

  addresses(): readonly string[] {
    return this.#addresses;
  }

  start(): void {
    this.#informer.start();
  }

  /** True once the slices have been listed: until then a replica does not know its share. */
  hasSynced(): boolean {
    return this.#informer.hasSynced();
  }

  waitForSync(signal?: AbortSignal): Promise<boolean> {
    return this.#informer.waitForSync(signal);
  }

  stop(): Promise<void> {
    return this.#informer.stop();
  }
}
