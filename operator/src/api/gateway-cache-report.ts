// What a gateway replica tells the operator about the caches it routes to
// (GET /cache-report.json on its admin port): per Deployment, counters of the
// prompt tokens it routed there and of those its routing expected cached, since
// it started (`instance` says which start), and each endpoint's KV-event index.
// The operator windows the counters as it windows the runtimes' own and compares
// them (the CacheHealthy condition). Both sides parse it with this schema, so a
// change here is a change of both.
import { z } from 'zod';

export const GATEWAY_CACHE_REPORT_PATH = '/cache-report.json';

export const GatewayEndpointEvents = z.object({
  usable: z.boolean().meta({ description: 'Routing reads this endpoint from its KV-event index.' }),
  reason: z.string().meta({ description: 'Why not (or why only partly); empty when it is whole.' }),
  lagMs: z.number().nullable().meta({ description: "The slowest rank's event lag; null: not measured yet." }),
});
export type GatewayEndpointEvents = z.infer<typeof GatewayEndpointEvents>;

export const GatewayDeploymentReport = z.object({
  deployment: z.string().meta({ description: 'namespace/name' }),
  decisions: z
    .number()
    .int()
    .nonnegative()
    .meta({ description: 'Routing decisions with a prediction, since the replica started.' }),
  promptTokens: z.number().nonnegative(),
  predictedTokens: z
    .number()
    .nonnegative()
    .meta({ description: 'Of promptTokens, those routing expected cached.' }),
  endpoints: z.array(
    z.object({
      pod: z.string(),
      events: GatewayEndpointEvents.optional().meta({
        description: 'Absent: the endpoint publishes no KV events.',
      }),
    }),
  ),
});
export type GatewayDeploymentReport = z.infer<typeof GatewayDeploymentReport>;

export const GatewayCacheReport = z.object({
  instance: z
    .string()
    .min(1)
    .meta({ description: 'Changes at each start of the replica: counters begin again.' }),
  deployments: z.array(GatewayDeploymentReport),
});
export type GatewayCacheReport = z.infer<typeof GatewayCacheReport>;
