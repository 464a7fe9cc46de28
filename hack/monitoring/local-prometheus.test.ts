import { describe, expect, it } from 'vitest';
import { buildLocalPrometheusConfig, buildSglangTargets } from './local-prometheus.ts';

const pod = (name: string, ready: boolean, ip?: string) => ({
  metadata: {
    name,
    namespace: 'team',
    labels: {
      'cacheroute.dev/deployment': 'llama-8b',
      'cacheroute.dev/deployment-id': 'llama-r1',
      'cacheroute.dev/fingerprint': 'abc',
      'cacheroute.dev/role': 'standalone',
    },
  },
  spec: {
    containers: [
      {
        ports: [
          { name: 'kv-events', containerPort: 5557 },
          { name: 'http', containerPort: 30000 },
        ],
      },
    ],
  },
  status: { ...(ip ? { podIP: ip } : {}), conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
});

describe('buildSglangTargets', () => {
  it("targets Ready pods' http port with the labels the chart's PodMonitor relabelling gives", () => {
    const targets = buildSglangTargets({
      items: [pod('llama-a', true, '10.0.0.1'), pod('llama-b', false, '10.0.0.2'), pod('llama-c', true)],
    });
    expect(targets).toEqual([
      {
        targets: ['10.0.0.1:30000'],
        labels: {
          namespace: 'team',
          pod: 'llama-a',
          deployment: 'team/llama-8b',
          endpoint: 'team/llama-a',
          deployment_id: 'llama-r1',
          fingerprint: 'abc',
          role: 'standalone',
        },
      },
    ]);
  });
});

describe('buildLocalPrometheusConfig', () => {
  it('scrapes under the job names the alerts and dashboards select by, and loads the alerts', () => {
    const c = buildLocalPrometheusConfig('/x/targets.json', '2s') as {
      rule_files: string[];
      scrape_configs: { job_name: string }[];
    };
    expect(c.scrape_configs.map((s) => s.job_name)).toEqual([
      'cacheroute-operator',
      'cacheroute-gateway',
      'cacheroute-sglang',
    ]);
    expect(c.rule_files[0]).toMatch(/charts\/cacheroute\/monitoring\/alerts\.yaml$/);
  });
});
