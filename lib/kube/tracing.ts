// The OpenTelemetry SDK setup the operator and the gateway share: spans exported over OTLP
// when tracing-config.ts finds an endpoint.
//
// The SDK is imported only by startTracing: a process without an endpoint loads the API
// alone, whose global tracer is the no-op one until a provider is registered.

import { trace, type TracerProvider } from '@opentelemetry/api';
import type { TracingConfig } from './tracing-config.ts';

export interface RunningTracing {
  readonly provider: TracerProvider;
  /** Exports what is buffered, without stopping. */
  readonly flush: () => Promise<void>;
  /** Exports what is buffered and stops; the global tracer is the no-op one again. */
  readonly shutdown: () => Promise<void>;
}

/** Loads the SDK, exports to `config.url`, and registers the provider as the global one. */
export async function startTracing(config: TracingConfig): Promise<RunningTracing> {
  const [sdk, resources, { OTLPTraceExporter }] = await Promise.all([
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  const ratio = new sdk.TraceIdRatioBasedSampler(config.ratio);
  const root = {
    always_on: new sdk.AlwaysOnSampler(),
    always_off: new sdk.AlwaysOffSampler(),
    traceidratio: ratio,
    parentbased_always_on: new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() }),
    parentbased_always_off: new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() }),
    parentbased_traceidratio: new sdk.ParentBasedSampler({ root: ratio }),
  }[config.sampler];
  // OTEL_RESOURCE_ATTRIBUTES (e.g. the pod's name), under the service's name.
  const resource = resources
    .detectResources({ detectors: [resources.resourceAttributesEnvDetector] })
    .merge(resources.resourceFromAttributes({ 'service.name': config.serviceName }));
  const provider = new sdk.TracerProvider({
    resource,
    sampler: root,
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: config.url }) })],
  });
  trace.setGlobalTracerProvider(provider);
  return {
    provider,
    flush: () => provider.forceFlush(),
    shutdown: async () => {
      await provider.shutdown();
      trace.disable();
    },
  };
}
