// Tracing configuration from the standard OpenTelemetry environment variables, shared by
// the operator and the gateway. Off unless an OTLP endpoint is named: a process that was
// not asked to export loads no SDK and pays nothing per request or reconcile.
//
// Read: OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (only `otlp`, or `none` = off),
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL, used as given) or
// OTEL_EXPORTER_OTLP_ENDPOINT (the base: /v1/traces is appended, as the spec says),
// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL (only http/protobuf: the one exporter shipped),
// OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG.
// OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS are read by the SDK itself.

import { z } from 'zod';

export const TraceSampler = z.enum([
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
]);
export type TraceSampler = z.infer<typeof TraceSampler>;

export interface TracingConfig {
  /** Where spans are POSTed (OTLP over HTTP, protobuf). */
  readonly url: string;
  readonly serviceName: string;
  readonly sampler: TraceSampler;
  /** For the ratio samplers: the fraction of new traces kept. */
  readonly ratio: number;
}

export type TracingEnv = Readonly<Record<string, string | undefined>>;

const Url = z.url({ protocol: /^https?$/, error: 'give an http(s) URL, e.g. http://collector:4318' });
const Ratio = z.coerce
  .number({ error: 'give a number from 0 to 1' })
  .min(0, 'give a number from 0 to 1')
  .max(1, 'give a number from 0 to 1');

/** The configuration the environment asks for; `undefined` when tracing is off. */
export function parseTracingConfig(
  env: TracingEnv,
  defaultServiceName: string,
): { ok: true; value: TracingConfig | undefined } | { ok: false; error: string } {
  const get = (name: string): string | undefined => {
    const v = env[name]?.trim();
    return v === '' ? undefined : v;
  };
  if (get('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return { ok: true, value: undefined };
  const exporter = get('OTEL_TRACES_EXPORTER');
  if (exporter === 'none') return { ok: true, value: undefined };
  if (exporter !== undefined && exporter !== 'otlp')
    return { ok: false, error: `OTEL_TRACES_EXPORTER: only otlp (or none) is supported, not ${exporter}` };
  const url = readUrl(get);
  if (!url.ok) return url;
  if (url.value === undefined) return { ok: true, value: undefined };
  const sampler = TraceSampler.safeParse(get('OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on');
  if (!sampler.success)
    return { ok: false, error: `OTEL_TRACES_SAMPLER: give one of ${TraceSampler.options.join(', ')}` };
  const arg = get('OTEL_TRACES_SAMPLER_ARG');
  const ratio = arg === undefined ? { success: true as const, data: 1 } : Ratio.safeParse(arg);
  if (!ratio.success)
    return { ok: false, error: `OTEL_TRACES_SAMPLER_ARG: ${ratio.error.issues[0]?.message ?? 'invalid'}` };
  return {
    ok: true,
    value: {
      url: url.value,
      serviceName: get('OTEL_SERVICE_NAME') ?? defaultServiceName,
      sampler: sampler.data,
      ratio: ratio.data,
    },
  };
}

/** The traces URL and that it is spoken to as OTLP/HTTP protobuf; undefined: none named. */
function readUrl(
  get: (name: string) => string | undefined,
): { ok: true; value: string | undefined } | { ok: false; error: string } {
  const tracesEndpoint = get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = get('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (tracesEndpoint === undefined && base === undefined) return { ok: true, value: undefined };
  const rawUrl = tracesEndpoint ?? `${(base ?? '').replace(/\/+$/, '')}/v1/traces`;
  const name = tracesEndpoint ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const url = Url.safeParse(rawUrl);
  if (!url.success) return { ok: false, error: `${name}: ${url.error.issues[0]?.message ?? 'invalid'}` };
  const protocol = get('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? get('OTEL_EXPORTER_OTLP_PROTOCOL');
  if (protocol !== undefined && protocol !== 'http/protobuf')
    return {
      ok: false,
      error: `OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is supported (the collector's port 4318), not ${protocol}`,
    };
  return { ok: true, value: url.data };
}
