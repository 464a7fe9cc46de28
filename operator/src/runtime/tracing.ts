// OpenTelemetry for the operator (and the SDK setup the gateway shares): a span per
// reconcile, exported over OTLP when tracing-config.ts finds an endpoint.
//
// The SDK is imported only by startTracing: a process without an endpoint loads the API
// alone, whose global tracer is the no-op one until a provider is registered. Reconcile
// spans go through that global tracer, so the manager wraps every reconciler the same way
// whether or not tracing is on; a no-op span costs a reconcile nothing measurable.
//
// A reconcile span is a root (a reconcile answers a key, not a request), named
// `reconcile <controller>`, with the key, the retry count and how it ended: success,
// requeue_after (with the delay), error or terminal_error (status ERROR, the exception).

import { SpanKind, SpanStatusCode, trace, type TracerProvider } from '@opentelemetry/api';
import type { ControllerDefinition } from './manager.ts';
import type { Reconciler } from './reconcile.ts';
import { isTerminalError } from './reconcile.ts';
import { formatKey } from './objects.ts';
import type { TracingConfig } from './tracing-config.ts';

export const OPERATOR_TRACER = 'cacheroute-operator';

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

/** The definition with its reconciler traced (manager.ts applies it to every controller). */
export function withReconcileSpans(def: ControllerDefinition): ControllerDefinition {
  return { ...def, reconciler: traceReconciler(def.name, def.reconciler) };
}

export function traceReconciler(controller: string, reconciler: Reconciler): Reconciler {
  const tracer = trace.getTracer(OPERATOR_TRACER);
  const name = `reconcile ${controller}`;
  return {
    async reconcile(key, ctx) {
      const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, root: true });
      if (!span.isRecording()) return reconciler.reconcile(key, ctx);
      span.setAttributes({
        'cacheroute.controller': controller,
        'cacheroute.object.key': formatKey(key),
        'k8s.namespace.name': key.namespace,
        'cacheroute.reconcile.retries': ctx.retries,
      });
      try {
        const result = await reconciler.reconcile(key, ctx);
        const after = result?.requeueAfterMs;
        if (after !== undefined && after > 0) {
          span.setAttributes({
            'cacheroute.reconcile.result': 'requeue_after',
            'cacheroute.reconcile.requeue_after_ms': after,
          });
        } else span.setAttribute('cacheroute.reconcile.result', 'success');
        return result;
      } catch (err) {
        const error = err instanceof Error ? err : new Error(String(err));
        span.setAttribute('cacheroute.reconcile.result', isTerminalError(err) ? 'terminal_error' : 'error');
        span.recordException(error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
        throw err;
      } finally {
        span.end();
      }
    },
  };
}
