import { describe, expect, it } from 'vitest';
import { parseTracingConfig, type TracingEnv } from './tracing-config.ts';

const parse = (env: TracingEnv) => parseTracingConfig(env, 'svc');

describe('parseTracingConfig', () => {
  it.each<[string, TracingEnv]>([
    ['no endpoint', {}],
    ['an empty endpoint', { OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }],
    ['the SDK disabled', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }],
    ['the exporter none', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }],
  ])('off with %s', (_, env) => {
    expect(parse(env)).toEqual({ ok: true, value: undefined });
  });

  it.each<[string, TracingEnv, string]>([
    [
      'the base endpoint gets /v1/traces',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' },
      'http://c:4318/v1/traces',
    ],
    [
      'the traces endpoint is used as given, and wins',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:9/x' },
      'http://b:9/x',
    ],
  ])('%s', (_, env, url) => {
    const r = parse(env);
    expect(r.ok && r.value?.url).toBe(url);
  });

  it('defaults: the given service name, parent-based always-on', () => {
    expect(parse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toEqual({
      ok: true,
      value: {
        url: 'http://c:4318/v1/traces',
        serviceName: 'svc',
        sampler: 'parentbased_always_on',
        ratio: 1,
      },
    });
  });

  it('the service name and a ratio sampler from the environment', () => {
    const r = parse({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_SERVICE_NAME: 'gw-eu',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });
    expect(r).toMatchObject({
      ok: true,
      value: { serviceName: 'gw-eu', sampler: 'parentbased_traceidratio', ratio: 0.25 },
    });
  });

  it.each<[string, TracingEnv, string]>([
    [
      'a URL that is not http',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317' },
      'OTEL_EXPORTER_OTLP_ENDPOINT',
    ],
    [
      'gRPC',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      'http/protobuf',
    ],
    [
      'an unknown sampler',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_TRACES_SAMPLER: 'sometimes' },
      'OTEL_TRACES_SAMPLER',
    ],
    [
      'a ratio past 1',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_TRACES_SAMPLER_ARG: '2' },
      'from 0 to 1',
    ],
    [
      'another exporter',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_TRACES_EXPORTER: 'zipkin' },
      'only otlp',
    ],
  ])('refuses %s, naming what to change', (_, env, says) => {
    const r = parse(env);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toContain(says);
  });
});
