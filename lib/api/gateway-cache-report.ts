// What a gateway replica tells the operator about the caches it routes to
// (GET /cache-report.json on its admin port): per Deployment, counters of the
// prompt tokens it routed there and of those its routing expected cached, since
// it started (`instance` says which start), and each endpoint's KV-event index.
// The operator windows the counters as it windows the runtimes' own and compares
// them (the CacheHealthy condition). It also carries the replica's load, per
// Deployment (its admission queue) and per endpoint (in flight, predicted
// prefill, the runtime's own queue and KV usage): the operator sums the tier's
// and serves it as external metrics for autoscalers (metrics-api/). Both sides
// parse it with this schema, so a change here is a change of both.
import { z } from 'zod';
import { EndpointRole } from './deployment-status.ts';

export const GATEWAY_CACHE_REPORT_PATH = '/cache-report.json';

export const GatewayEndpointEvents = z.object({
  usable: z.boolean().meta({ description: 'Routing reads this endpoint from its KV-event index.' }),
  reason: z.string().meta({ description: 'Why not (or why only partly); empty when it is whole.' }),
  lagMs: z.number().nullable().meta({ description: "The slowest rank's event lag; null: not measured yet." }),
});
export type GatewayEndpointEvents = z.infer<typeof GatewayEndpointEvents>;

export const GatewayEndpointLoad = z.object({
  inFlight: z
    .number()
    .int()
    .nonnegative()
    .meta({ description: 'Requests this replica has in flight there.' }),
  pendingPrefillTokens: z.number().nonnegative().meta({
    description: 'Prompt tokens this replica sent there whose first byte has not come back.',
  }),
  prefillTokensPerSecond: z
    .number()
    .positive()
    .nullable()
    .meta({ description: "The endpoint's prefill rate as this replica learned it; null: not yet." }),
  runtimeQueued: z
    .number()
    .nonnegative()
    .nullable()
    .meta({ description: "The runtime's own queue (sglang:num_queue_reqs); null: not read." }),
  tokenUsage: z
    .number()
    .min(0)
    .nullable()
    .meta({ description: "The runtime's KV usage 0..1 (sglang:token_usage); null: not read." }),
});
export type GatewayEndpointLoad = z.infer<typeof GatewayEndpointLoad>;

export const GatewayAdmissionLoad = z.object({
  queued: z.number().int().nonnegative().meta({ description: "Requests in this replica's admission queue." }),
  inFlight: z.number().int().nonnegative().meta({ description: 'Requests this replica admitted, not done.' }),
  admitted: z.number().int().nonnegative().optional().meta({
    description:
      'Requests admitted since the replica started: a sampler that reads now and then sees short requests by it.',
  }),
  rejected: z
    .number()
    .int()
    .nonnegative()
    .meta({ description: 'Requests refused (overloaded, queue timeout), since the replica started.' }),
});
export type GatewayAdmissionLoad = z.infer<typeof GatewayAdmissionLoad>;

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
  waking: z.number().int().nonnegative().optional().meta({
    description: 'Requests this replica holds until the Deployment (waking from zero) has an endpoint.',
  }),
  admission: GatewayAdmissionLoad.optional().meta({
    description: 'Absent: a gateway from before the load was reported (its load is then unknown, not zero).',
  }),
  endpoints: z.array(
    z.object({
      pod: z.string(),
      role: EndpointRole.optional(),
      events: GatewayEndpointEvents.optional().meta({
        description: 'Absent: the endpoint publishes no KV events.',
      }),
      load: GatewayEndpointLoad.optional(),
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
