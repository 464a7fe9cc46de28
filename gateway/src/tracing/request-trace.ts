// The gateway's request spans on the OpenTelemetry API: loaded (server.ts) only when an
// OTLP endpoint is configured. The server span continues the client's W3C trace context;
// admission, the routing decision, each upstream attempt and the reuse lookup are its
// children; each upstream request carries its attempt span's traceparent, so the runtime's
// spans (SGLang with --enable-trace) join the same trace.
//
// Parents are passed explicitly (no context manager, no AsyncLocalStorage): the request
// path hands its RequestTrace along, which is all a child needs. A span a sampler dropped
// still propagates its context; attributes are set only on recording spans.

import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { SendOptions } from '../upstream/answer.ts';
import type {
  AdmissionSpan,
  RequestTrace,
  RequestTracer,
  ReuseSpan,
  TracedDecision,
  TracedUpstream,
  UpstreamSpan,
} from './types.ts';

export const GATEWAY_TRACER = 'cacheroute-gateway';

const propagator = new W3CTraceContextPropagator();

export function buildRequestTracer(tracer: Tracer): RequestTracer {
  return {
    start(route, headers) {
      const parent = propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
      const span = tracer.startSpan(`POST ${route}`, { kind: SpanKind.SERVER }, parent);
      if (span.isRecording()) span.setAttributes({ 'http.request.method': 'POST', 'http.route': route });
      return new SpanTree(tracer, span);
    },
  };
}

class SpanTree implements RequestTrace {
  readonly #tracer: Tracer;
  readonly #server: Span;
  readonly #context: Context;

  constructor(tracer: Tracer, server: Span) {
    this.#tracer = tracer;
    this.#server = server;
    this.#context = trace.setSpan(ROOT_CONTEXT, server);
  }

  #child(name: string, kind: SpanKind = SpanKind.INTERNAL): Span {
    return this.#tracer.startSpan(name, { kind }, this.#context);
  }

  routed(model: string, deployment: string, promptTokens: number, exactTokens: boolean): void {
    if (!this.#server.isRecording()) return;
    this.#server.setAttributes({
      'cacheroute.model': model,
      'cacheroute.deployment': deployment,
      'cacheroute.prompt_tokens': promptTokens,
      'cacheroute.tokens_exact': exactTokens,
    });
  }

  startAdmission(deployment: string, priority: number): AdmissionSpan {
    const span = this.#child('admission');
    if (span.isRecording())
      span.setAttributes({ 'cacheroute.deployment': deployment, 'cacheroute.admission.priority': priority });
    return {
      admitted(queuedMs) {
        if (span.isRecording())
          span.setAttributes({
            'cacheroute.admission.outcome': 'admitted',
            'cacheroute.admission.queue_ms': queuedMs,
          });
        span.end();
      },
      rejected(reason) {
        if (span.isRecording()) {
          span.setAttributes({
            'cacheroute.admission.outcome': 'rejected',
            'cacheroute.admission.reason': reason,
          });
          span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
        }
        span.end();
      },
    };
  }

  decided(d: TracedDecision): void {
    const span = this.#child('route');
    if (span.isRecording()) {
      span.setAttributes({
        'cacheroute.route.policy': d.policy,
        'cacheroute.model': d.model,
        'cacheroute.deployment': d.deployment,
        'cacheroute.route.endpoint': d.endpoint,
        'cacheroute.route.prompt_tokens': d.promptTokens,
        'cacheroute.route.match_source': d.matchSource,
        'cacheroute.route.attempt': d.attempt,
      });
      if (d.matchedTokens !== undefined)
        span.setAttribute('cacheroute.route.matched_tokens', d.matchedTokens);
      if (d.decode !== undefined) span.setAttribute('cacheroute.route.decode_endpoint', d.decode);
      if (d.stamp !== undefined)
        span.setAttributes({
          'cacheroute.route.runtime_priority': d.stamp.priority,
          'cacheroute.route.runtime_priority_bucket': d.stamp.bucket,
        });
    }
    span.end();
  }

  startUpstream(u: TracedUpstream): UpstreamSpan {
    const span = this.#child(`upstream ${u.role}`, SpanKind.CLIENT);
    if (span.isRecording()) {
      const url = new URL(u.path, u.url);
      span.setAttributes({
        'http.request.method': 'POST',
        'url.full': url.href,
        'server.address': url.hostname,
        'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
        'cacheroute.endpoint': u.endpoint,
        'cacheroute.upstream.role': u.role,
        'cacheroute.upstream.attempt': u.attempt,
      });
    }
    let ended = false;
    return {
      inject(send: SendOptions): SendOptions {
        const headers: Record<string, string> = {};
        propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
        return { ...send, headers };
      },
      settle(res) {
        if (!span.isRecording()) return;
        if ('error' in res) return recordFailure(span, res.error);
        span.setAttribute('http.response.status_code', res.statusCode);
        if (res.statusCode >= 500)
          span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${res.statusCode}` });
      },
      end(failure) {
        if (ended) return;
        ended = true;
        if (failure !== undefined && span.isRecording()) recordFailure(span, failure);
        span.end();
      },
    };
  }

  startReuse(): ReuseSpan {
    const span = this.#child('reuse');
    return {
      end(source) {
        if (span.isRecording())
          span.setAttributes({
            'cacheroute.reuse.source': source,
            'cacheroute.reuse.hit': source !== 'fresh',
          });
        span.end();
      },
    };
  }

  end(statusCode: number, errorCode?: string): void {
    if (this.#server.isRecording()) {
      this.#server.setAttribute('http.response.status_code', statusCode);
      // OTel's HTTP server conventions: an error status on 5xx only; error.type also names the
      // gateway's own code on a 4xx, where the convention leaves it optional.
      if (errorCode !== undefined) this.#server.setAttribute('error.type', errorCode);
      if (statusCode >= 500) this.#server.setStatus({ code: SpanStatusCode.ERROR, message: errorCode ?? '' });
    }
    this.#server.end();
  }
}

function recordFailure(span: Span, failure: unknown): void {
  const err = failure instanceof Error ? failure : new Error(String(failure));
  span.recordException(err);
  span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
}
