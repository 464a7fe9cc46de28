// Tracing for the gateway process: from the OTEL_* environment (tracing-config.ts), the
// SDK and the request spans are loaded only when an OTLP endpoint is named. Off, nothing
// here loads anything and the app is built without a tracer.

import { parseTracingConfig, type TracingEnv } from '#kube/tracing-config.ts';
import type { RequestTracer } from './types.ts';

export const GATEWAY_SERVICE_NAME = 'cacheroute-gateway';

export interface GatewayTracing {
  readonly tracer: RequestTracer;
  /** Where spans go, for the start-up log. */
  readonly url: string;
  /** Exports the spans ended so far (tests read them back at once). */
  readonly flush: () => Promise<void>;
  readonly shutdown: () => Promise<void>;
}

export async function startGatewayTracing(
  env: TracingEnv,
): Promise<{ ok: true; value: GatewayTracing | undefined } | { ok: false; error: string }> {
  const config = parseTracingConfig(env, GATEWAY_SERVICE_NAME);
  if (!config.ok) return config;
  if (config.value === undefined) return { ok: true, value: undefined };
  const [{ startTracing }, { buildRequestTracer, GATEWAY_TRACER }] = await Promise.all([
    import('#kube/tracing.ts'),
    import('./request-trace.ts'),
  ]);
  const running = await startTracing(config.value);
  return {
    ok: true,
    value: {
      tracer: buildRequestTracer(running.provider.getTracer(GATEWAY_TRACER)),
      url: config.value.url,
      flush: running.flush,
      shutdown: running.shutdown,
    },
  };
}
