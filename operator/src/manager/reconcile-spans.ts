// A span per reconcile, through OpenTelemetry's global tracer: the no-op one unless
// startTracing (#kube/tracing.ts) registered a provider, so the manager wraps every
// reconciler the same way whether or not tracing is on; a no-op span costs a reconcile
// nothing measurable.
//
// A reconcile span is a root (a reconcile answers a key, not a request), named
// `reconcile <controller>`, with the key, the retry count and how it ended: success,
// requeue_after (with the delay), error or terminal_error (status ERROR, the exception).

import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { formatKey } from '#kube/objects.ts';
import type { Reconciler } from './reconcile.ts';
import { isTerminalError } from './reconcile.ts';

export const OPERATOR_TRACER = 'cacheroute-operator';

/** The reconciler with a span per reconcile (manager.ts wraps every controller's). */
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
