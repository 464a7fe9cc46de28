// A picker over a routing table with the real state it reads (endpoint book,
// standing endpoints, policies, admission, reuse store, a KV index fleet that
// follows nothing), for tests that call it directly, with no HTTP.
import { AdmissionRegistry } from '../../../gateway/src/admission/index.ts';
import { ManualClock } from '../manual-clock.ts';
import { EndpointBook } from '../../../gateway/src/endpoints/book.ts';
import { StandingEndpoints } from '../../../gateway/src/endpoints/standing.ts';
import { buildSoloPeers } from '../../../gateway/src/fleet/peers.ts';
import { TierPosition } from '../../../gateway/src/fleet/tier-position.ts';
import { KvIndexFleet } from '../../../gateway/src/kv-index/fleet.ts';
import { buildMetrics } from '../../../gateway/src/metrics/index.ts';
import { Picker } from '../../../gateway/src/picker/pick.ts';
import type { DecisionLog, PickRequest, PickResult, PickScope } from '../../../gateway/src/picker/types.ts';
import type { TierStanding } from '../../../gateway/src/policies/index.ts';
import { WakeHolds } from '../../../gateway/src/picker/wake-hold.ts';
import { listEndpointStates } from '../../../gateway/src/routing/endpoint-state.ts';
import { PolicyRegistry } from '../../../gateway/src/routing/policy-registry.ts';
import { MemoryResultStore, ResultReuser } from '../../../gateway/src/reuse/index.ts';
import { StaticRoutingTable, type ModelRoute } from '../../../gateway/src/routing/table.ts';
import { MemoryRateLimiter } from '../../../gateway/src/tenancy/limiter.ts';

export interface TestPicker {
  readonly picker: Picker;
  readonly book: EndpointBook;
  readonly clock: ManualClock;
  /** Picks a chat request for model 'm' with `content` as its one user message. */
  pickChat(content: string, over?: Partial<PickRequest> & { readonly extra?: object }): Promise<PickResult>;
  close(): Promise<void>;
}

const QUIET_LOG: DecisionLog = { level: 'silent', info: () => undefined };

export function buildTestPicker(
  routes: readonly ModelRoute[],
  opts: { readonly random32?: () => number; readonly tierStanding?: TierStanding } = {},
): TestPicker {
  const clock = new ManualClock();
  const table = new StaticRoutingTable(routes);
  const metrics = buildMetrics({ endpointStates: () => listEndpointStates(table) });
  const book = new EndpointBook({ metrics, clock, runtimeLoad: () => undefined });
  const standing = new StandingEndpoints(clock);
  const kvIndex = new KvIndexFleet({ clock });
  const tier = new TierPosition(buildSoloPeers());
  const picker = new Picker({
    table,
    metrics,
    clock,
    policies: new PolicyRegistry(),
    view: (e, cached) => book.view(e, cached),
    standing: (endpoints) => standing.filter(endpoints),
    kvIndex,
    followRoute: () => undefined,
    tokenizers: new Map(),
    limiter: new MemoryRateLimiter(clock, (total) => tier.shareOf(total)),
    wakeHolds: new WakeHolds(clock),
    admission: new AdmissionRegistry(clock),
    tier,
    reuser: new ResultReuser(new MemoryResultStore({ maxEntries: 100 }, clock)),
    ...(opts.random32 ? { random32: opts.random32 } : {}),
    ...(opts.tierStanding ? { tierStanding: () => opts.tierStanding } : {}),
  });
  const scope: PickScope = { signal: new AbortController().signal, log: QUIET_LOG };
  let seq = 0;
  return {
    picker,
    book,
    clock,
    pickChat: (content, { extra, ...over } = {}) =>
      picker.pick(
        {
          id: `r${seq++}`,
          kind: 'chat',
          path: '/v1/chat/completions',
          body: { model: 'm', messages: [{ role: 'user', content }], ...extra },
          headers: {},
          ...over,
        },
        scope,
      ),
    close: () => kvIndex.close(),
  };
}
