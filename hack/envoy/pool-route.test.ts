// The pool's view and the endpoints file Envoy follows, from the objects the API server sends:
// what make run's follower writes on each change (follow-pool.ts), without a cluster.
import { describe, expect, it } from 'vitest';
import { renderPoolEndpointsFile } from './bootstrap.ts';
import { decidePoolFile } from './follow-pool.ts';
import { buildPoolView } from './pool-route.ts';

const SECRET = 'llama-runtime-api-key';
const b64 = (s: string): string => Buffer.from(s).toString('base64');

const pool = (failureMode?: 'FailOpen' | 'FailClose') => ({
  metadata: { name: 'llama', namespace: 'ns' },
  spec: {
    selector: { matchLabels: { 'cacheroute.dev/deployment': 'llama' } },
    targetPorts: [{ number: 30000 }],
    ...(failureMode ? { endpointPickerRef: { failureMode } } : {}),
  },
});

const pod = (
  name: string,
  ip: string,
  entry: string,
  opts: { ready?: boolean; deployment?: string; deleting?: boolean } = {},
) => ({
  metadata: {
    name,
    labels: { 'cacheroute.dev/deployment': opts.deployment ?? 'llama' },
    ...(opts.deleting ? { deletionTimestamp: '2026-12-05T20:00:00Z' } : {}),
  },
  spec: {
    containers: [{ env: [{ valueFrom: { secretKeyRef: { name: SECRET, key: entry } } }] }],
  },
  status: {
    podIP: ip,
    conditions: [{ type: 'Ready', status: opts.ready === false ? 'False' : 'True' }],
  },
});

const secret = (entries: Record<string, string>) => ({
  metadata: { name: SECRET },
  data: Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, b64(v)])),
});

describe('buildPoolView', () => {
  it("FailOpen: the selected Ready pods on the target ports, each with its identity's key", () => {
    const view = buildPoolView({
      pool: pool('FailOpen'),
      pods: [
        pod('new', '10.0.0.2', 'fp-new'),
        pod('old', '10.0.0.1', 'fp-old'),
        pod('starting', '10.0.0.3', 'fp-new', { ready: false }),
        // Deleted, its Ready condition not yet turned: draining, out of the pool.
        pod('leaving', '10.0.0.5', 'fp-old', { deleting: true }),
        pod('other', '10.0.0.4', 'fp-old', { deployment: 'mistral' }),
      ],
      secrets: [secret({ 'fp-old': 'key-old', 'fp-new': 'key-new' }), { metadata: { name: 'unrelated' } }],
    });
    expect(view).toEqual({
      namespace: 'ns',
      name: 'llama',
      failureMode: 'FailOpen',
      endpoints: ['10.0.0.1:30000', '10.0.0.2:30000'],
      runtimeKeys: { '10.0.0.1:30000': 'key-old', '10.0.0.2:30000': 'key-new' },
    });
  });

  it('FailClose (also when the pool leaves it out): endpoints, no keys, no Secret needed', () => {
    for (const mode of [undefined, 'FailClose'] as const)
      expect(buildPoolView({ pool: pool(mode), pods: [pod('a', '10.0.0.1', 'fp')], secrets: [] })).toEqual({
        namespace: 'ns',
        name: 'llama',
        failureMode: 'FailClose',
        endpoints: ['10.0.0.1:30000'],
      });
  });

  it('FailOpen refuses a pod without its key, and a missing Secret, saying which', () => {
    expect(() =>
      buildPoolView({
        pool: pool('FailOpen'),
        pods: [pod('a', '10.0.0.1', 'fp-new')],
        secrets: [secret({ 'fp-old': 'k' })],
      }),
    ).toThrow(/pod ns\/a .* no key in Secret llama-runtime-api-key \(entry fp-new\)/);
    expect(() => buildPoolView({ pool: pool('FailOpen'), pods: [], secrets: [] })).toThrow(
      /no runtime key Secret llama-runtime-api-key/,
    );
  });
});

describe('renderPoolEndpointsFile', () => {
  it('an EDS DiscoveryResponse of the destination cluster, each key in its endpoint metadata', () => {
    const file = JSON.parse(
      renderPoolEndpointsFile(['10.0.0.1:30000'], { '10.0.0.1:30000': 'k1' }),
    ) as unknown;
    expect(file).toEqual({
      resources: [
        {
          '@type': 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
          cluster_name: 'original_destination_cluster',
          endpoints: [
            {
              lb_endpoints: [
                {
                  endpoint: { address: { socket_address: { address: '10.0.0.1', port_value: 30000 } } },
                  metadata: { filter_metadata: { 'cacheroute.runtime': { authorization: 'Bearer k1' } } },
                },
              ],
            },
          ],
        },
      ],
    });
  });

  it('refuses an endpoint without a key when keys are given; an empty pool is a file with no endpoint', () => {
    expect(() => renderPoolEndpointsFile(['10.0.0.1:1', '10.0.0.2:1'], { '10.0.0.1:1': 'k' })).toThrow(
      /none for 10\.0\.0\.2:1/,
    );
    expect(renderPoolEndpointsFile([], {})).toContain('"lb_endpoints": []');
  });
});

describe('decidePoolFile', () => {
  const expected = { namespace: 'ns', name: 'llama', failureMode: 'FailOpen' as const };
  const objects = {
    pools: [pool('FailOpen')],
    pods: [pod('a', '10.0.0.1', 'fp')],
    secrets: [secret({ fp: 'k' })],
  };

  it('writes what changed, and nothing when the render is the same', () => {
    const first = decidePoolFile(objects, expected, undefined);
    expect(first.outcome.kind).toBe('written');
    expect(first.text).toBe(renderPoolEndpointsFile(['10.0.0.1:30000'], { '10.0.0.1:30000': 'k' }));
    expect(decidePoolFile(objects, expected, first.text)).toEqual({ outcome: { kind: 'unchanged' } });
    const rotated = decidePoolFile({ ...objects, secrets: [secret({ fp: 'k2' })] }, expected, first.text);
    expect(rotated.text).toContain('Bearer k2');
  });

  it('keeps the file (no text) when the pool is gone, changed mode, or cannot be rendered', () => {
    const reasons = [
      decidePoolFile({ ...objects, pools: [] }, expected, 'x'),
      decidePoolFile({ ...objects, pools: [pool('FailClose')] }, expected, 'x'),
      decidePoolFile({ ...objects, secrets: [secret({ other: 'k' })] }, expected, 'x'),
    ].map((d) => {
      expect(d.text).toBeUndefined();
      return d.outcome.kind === 'not-followed' ? d.outcome.reason : d.outcome.kind;
    });
    expect(reasons[0]).toMatch(/InferencePool ns\/llama is gone/);
    expect(reasons[1]).toMatch(/is now FailClose, Envoy's bootstrap FailOpen: restart/);
    expect(reasons[2]).toMatch(/no key in Secret/);
  });
});

it('decidePoolFile: FailClose writes nothing, and says to restart when the pool turns FailOpen', () => {
  const expected = { namespace: 'ns', name: 'llama', failureMode: 'FailClose' as const };
  const objects = { pods: [pod('a', '10.0.0.1', 'fp')], secrets: [secret({ fp: 'k' })] };
  expect(decidePoolFile({ ...objects, pools: [pool('FailClose')] }, expected, undefined)).toEqual({
    outcome: { kind: 'unchanged' },
  });
  expect(
    decidePoolFile({ ...objects, pools: [pool('FailOpen')] }, expected, undefined).outcome,
  ).toMatchObject({
    kind: 'not-followed',
    reason: expect.stringMatching(/now FailOpen, Envoy's bootstrap FailClose: restart/),
  });
});
