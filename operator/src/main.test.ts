import { describe, expect, it } from 'vitest';
import {
  hostPathRootsOf,
  metricsApiOf,
  modelCacheOf,
  paidCallsBaseUrl,
  parseFlags,
  pickerOf,
  runtimeIngressOf,
} from './main.ts';

describe('operator flags', () => {
  it('--host-path-roots: the node cache root unless given; a list, or none', () => {
    const roots = (argv: string[]): readonly string[] | string => {
      const f = parseFlags(argv);
      return f.ok ? hostPathRootsOf(f.value) : f.error;
    };
    expect(roots([])).toEqual(['/var/lib/cacheroute/models']);
    expect(roots(['--model-cache-node-root', '/mnt/cache'])).toEqual(['/mnt/cache']);
    expect(roots(['--host-path-roots', '/data/models,/var/lib/cacheroute/models'])).toEqual([
      '/data/models',
      '/var/lib/cacheroute/models',
    ]);
    expect(roots(['--host-path-roots='])).toEqual([]);
    expect(roots(['--host-path-roots', 'models'])).toContain('--host-path-roots: absolute paths');
  });

  it('keeps InferencePools only when told the picker Service, its namespace required', () => {
    const picker = (argv: string[]) => {
      const f = parseFlags(argv);
      return f.ok ? pickerOf(f.value) : f.error;
    };
    expect(picker([])).toBeUndefined();
    expect(
      picker([
        '--inference-pool-picker-service',
        'cr-picker',
        '--inference-pool-picker-namespace',
        'cacheroute',
      ]),
    ).toEqual({ name: 'cr-picker', namespace: 'cacheroute', port: 9002 });
    expect(
      picker([
        '--inference-pool-picker-service=cr-picker',
        '--inference-pool-picker-namespace=cacheroute',
        '--inference-pool-picker-port=9102',
      ]),
    ).toMatchObject({ port: 9102 });
    expect(picker(['--inference-pool-picker-service', 'cr-picker'])).toContain(
      "--inference-pool-picker-namespace: required with --inference-pool-picker-service: the picker Service's namespace",
    );
    expect(picker(['--inference-pool-picker-service', 'Picker_1'])).toContain(
      '--inference-pool-picker-service: a Service name',
    );
  });

  it('makes no paid call unless --allow-paid-calls=true', () => {
    const off = parseFlags([]);
    expect(off.ok && paidCallsBaseUrl(off.value)).toBeUndefined();
    const on = parseFlags(['--allow-paid-calls=true', '--openrouter-base-url', 'http://or.test/api/v1']);
    expect(on.ok && paidCallsBaseUrl(on.value)).toBe('http://or.test/api/v1');
    const defaultUrl = parseFlags(['--allow-paid-calls', 'true']);
    expect(defaultUrl.ok && paidCallsBaseUrl(defaultUrl.value)).toBe('https://openrouter.ai/api/v1');
  });

  it('says what to change for a bad value or an unknown flag', () => {
    expect(parseFlags(['--allow-paid-calls=yes'])).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^--allow-paid-calls: /),
    });
    expect(parseFlags(['--openrouter-url=http://x'])).toEqual({
      ok: false,
      error: 'unknown flag --openrouter-url',
    });
    expect(parseFlags(['--paid-calls-daily-cap=10'])).toEqual({
      ok: false,
      error: '--paid-calls-daily-cap: "10" is not an amount and a currency, e.g. "10 USD"',
    });
  });

  it('measures caches every 30 s by default, reads the gateway only when told where, over HTTP', () => {
    const d = parseFlags([]);
    expect(d.ok && d.value['cache-health-period-seconds']).toBe(30);
    expect(d.ok && d.value['gateway-admin-url']).toBeUndefined();
    const on = parseFlags([
      '--gateway-admin-url=http://gw-replicas.cr.svc:9090',
      '--cache-health-period-seconds=0',
    ]);
    expect(on.ok && [on.value['gateway-admin-url'], on.value['cache-health-period-seconds']]).toEqual([
      'http://gw-replicas.cr.svc:9090',
      0,
    ]);
    expect(parseFlags(['--gateway-admin-url=gw:9090'])).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^--gateway-admin-url: /),
    });
    expect(parseFlags(['--cache-health-period-seconds=-1'])).toMatchObject({ ok: false });
  });

  it('serves the external metrics API only when given a port, with its key pair and the gateway', () => {
    const off = parseFlags([]);
    expect(off.ok && metricsApiOf(off.value)).toBeUndefined();
    const on = parseFlags([
      '--metrics-api-port=6443',
      '--metrics-api-tls-cert-file=/tls/tls.crt',
      '--metrics-api-tls-key-file=/tls/tls.key',
      '--gateway-admin-url=http://gw-replicas.cr.svc:9090',
    ]);
    expect(on.ok && metricsApiOf(on.value)).toEqual({
      host: '0.0.0.0',
      port: 6443,
      certFile: '/tls/tls.crt',
      keyFile: '/tls/tls.key',
      gatewayAdminUrl: 'http://gw-replicas.cr.svc:9090',
    });
    const missing = parseFlags(['--metrics-api-port=6443']);
    expect(missing.ok ? '' : missing.error).toContain(
      '--metrics-api-tls-cert-file: required with --metrics-api-port',
    );
    expect(missing.ok ? '' : missing.error).toContain(
      '--gateway-admin-url: required with --metrics-api-port',
    );
  });

  it('caps paid calls at 10 USD per namespace and day unless told otherwise', () => {
    const d = parseFlags([]);
    expect(d.ok && d.value['paid-calls-daily-cap']).toEqual({ amount: 10n * 10n ** 18n, currency: 'USD' });
    const eur = parseFlags(['--paid-calls-daily-cap=2.5 EUR']);
    expect(eur.ok && eur.value['paid-calls-daily-cap']).toEqual({
      amount: 25n * 10n ** 17n,
      currency: 'EUR',
    });
  });

  it('watches every namespace by default, or exactly those given, comma-separated or repeated', () => {
    const all = parseFlags([]);
    expect(all.ok && all.value.namespace).toEqual([]);
    const none = parseFlags(['--namespace=']);
    expect(none.ok && none.value.namespace).toEqual([]);
    const one = parseFlags(['--namespace', 'team-a']);
    expect(one.ok && one.value.namespace).toEqual(['team-a']);
    const listed = parseFlags(['--namespace=team-a, team-b', '--namespace', 'team-c', '--namespace=team-a']);
    expect(listed.ok && listed.value.namespace).toEqual(['team-a', 'team-b', 'team-c']);
  });

  it('lets fetched sources use plain http:// only to the hosts --insecure-endpoint-hosts lists', () => {
    const none = parseFlags(['--model-fetch-image=img']);
    expect(none.ok && modelCacheOf(none.value)?.insecureEndpointHosts).toEqual([]);
    const listed = parseFlags([
      '--model-fetch-image=img',
      '--insecure-endpoint-hosts=MinIO.storage, mirror.example',
      '--insecure-endpoint-hosts',
      '10.0.0.7',
    ]);
    expect(listed.ok && modelCacheOf(listed.value)?.insecureEndpointHosts).toEqual([
      'minio.storage',
      'mirror.example',
      '10.0.0.7',
    ]);
    expect(parseFlags(['--insecure-endpoint-hosts=http://minio:9000'])).toEqual({
      ok: false,
      error:
        '--insecure-endpoint-hosts: "http://minio:9000" is not a host name (a DNS name or an IP address, without scheme or port)',
    });
  });

  it('refuses a namespace that is not a namespace name, naming it', () => {
    expect(parseFlags(['--namespace=team-a,Team_B'])).toEqual({
      ok: false,
      error: `--namespace: "Team_B" is not a namespace name (lower-case letters, digits and '-')`,
    });
    expect(parseFlags(['--namespace', 'a', '--namespace', `${'x'.repeat(64)}`])).toEqual({
      ok: false,
      error: `--namespace: "${'x'.repeat(64)}" is longer than a namespace name (63 characters)`,
    });
    expect(parseFlags(['--namespace'])).toEqual({ ok: false, error: '--namespace needs a value' });
  });

  it('makes runtime NetworkPolicies only when asked, admitting the peers the flags name', () => {
    const off = parseFlags([]);
    expect(off.ok && runtimeIngressOf(off.value)).toBeUndefined();
    const on = parseFlags([
      '--runtime-network-policy=true',
      '--runtime-ingress-gateway=namespace=cr,app.kubernetes.io/instance=cr,app.kubernetes.io/component=gateway',
      '--runtime-ingress-operator',
      'namespace=cr, app.kubernetes.io/component=operator',
      '--runtime-ingress-metrics=namespace=monitoring',
    ]);
    expect(on.ok && runtimeIngressOf(on.value)).toEqual({
      gateway: {
        namespace: 'cr',
        podLabels: { 'app.kubernetes.io/instance': 'cr', 'app.kubernetes.io/component': 'gateway' },
      },
      operator: { namespace: 'cr', podLabels: { 'app.kubernetes.io/component': 'operator' } },
      metrics: { namespace: 'monitoring', podLabels: {} },
    });
  });

  it.each([
    [
      ['--runtime-network-policy=true', '--runtime-ingress-operator=namespace=cr'],
      '--runtime-ingress-gateway: required with --runtime-network-policy=true: the namespace and labels of the gateway pods (namespace=NS,LABEL=VALUE,...)',
    ],
    [
      ['--runtime-ingress-gateway=namespace=cr'],
      '--runtime-ingress-gateway: given without --runtime-network-policy=true: no NetworkPolicy is made to admit it',
    ],
    [
      [
        '--runtime-network-policy=true',
        '--runtime-ingress-gateway=cr',
        '--runtime-ingress-operator=namespace=cr',
      ],
      '--runtime-ingress-gateway: "cr" is not KEY=VALUE (namespace=NS,LABEL=VALUE,...)',
    ],
    [
      [
        '--runtime-network-policy=true',
        '--runtime-ingress-gateway=namespace=cr',
        '--runtime-ingress-operator=app=op',
      ],
      '--runtime-ingress-operator: no namespace=NS: name the namespace of the pods (namespace=NS,LABEL=VALUE,...)',
    ],
    [
      [
        '--runtime-network-policy=true',
        '--runtime-ingress-gateway=namespace=Cr',
        '--runtime-ingress-operator=namespace=cr',
      ],
      '--runtime-ingress-gateway: "Cr" is not a namespace name',
    ],
    [
      [
        '--runtime-network-policy=true',
        '--runtime-ingress-gateway=namespace=cr,app=a b',
        '--runtime-ingress-operator=namespace=cr',
      ],
      '--runtime-ingress-gateway: "a b" is not a label value (label app)',
    ],
    [
      [
        '--runtime-network-policy=true',
        '--runtime-ingress-gateway=namespace=cr,-x=1',
        '--runtime-ingress-operator=namespace=cr',
      ],
      '--runtime-ingress-gateway: "-x" is not a label key',
    ],
  ])('refuses %j naming the flag and what to change', (argv, error) => {
    expect(parseFlags(argv)).toEqual({ ok: false, error });
  });
});
