// A routing-table entry for tests: one model ('m') of one Deployment ('ns/m'), its
// endpoints verified and ready unless said otherwise.
import { Admission, ResultReuse, RoutingSettings } from '#api';
import type { ModelRoute, RouteEndpoint } from '../../../gateway/src/routing/table.ts';

export function buildTestEndpoint(id: string, url: string, over: Partial<RouteEndpoint> = {}): RouteEndpoint {
  return { id, url, role: 'standalone', fingerprint: 'fp1', verified: true, ready: true, ...over };
}

export function buildTestRoute(
  endpoints: readonly RouteEndpoint[],
  settings: { policy?: string; reuse?: boolean } = {},
  over: Partial<ModelRoute> = {},
): ModelRoute {
  return {
    model: 'm',
    deployment: 'ns/m',
    fingerprint: 'fp1',
    salt: 's',
    routing: RoutingSettings.parse({ policy: settings.policy ?? 'round-robin' }),
    admission: Admission.parse({ adaptive: false }),
    reuse: ResultReuse.parse({ enabled: settings.reuse ?? true }),
    endpoints,
    ...over,
  };
}
