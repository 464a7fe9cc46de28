// The operator's external metrics API registered with a test control plane as
// the chart registers it: a Service without a selector whose endpoint is the
// host address the in-process operator listens on (the API server dials it by
// aggregator routing), and the APIService, trusted through the serving CA.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { eventually, kubectl, kubectlOk } from './kubectl.ts';
import { issueServingCert, pkiPaths, type CertPair } from './pki.ts';

export const METRICS_API_SERVICE = { namespace: 'cacheroute-metrics-test', name: 'cacheroute-metrics-api' };
export const METRICS_API_NAME = 'v1beta1.external.metrics.k8s.io';

/** A serving certificate for the metrics API at `hostIP`, under the Service's DNS name too. */
export function issueMetricsApiCert(controlPlaneDir: string, hostIP: string): Promise<CertPair> {
  const { name, namespace } = METRICS_API_SERVICE;
  return issueServingCert(pkiPaths(join(controlPlaneDir, 'pki')).dir, 'metrics-api', {
    ips: [hostIP],
    dnsNames: [`${name}.${namespace}.svc`],
  });
}

/** Registers the API at hostIP:port and waits until the aggregator calls it Available. */
export async function registerMetricsApi(
  kubeconfig: string,
  controlPlaneDir: string,
  at: { hostIP: string; port: number },
): Promise<void> {
  const service = METRICS_API_SERVICE;
  const caBundle = readFileSync(pkiPaths(join(controlPlaneDir, 'pki')).servingCa.cert).toString('base64');
  const ports = [{ name: 'https', port: at.port, protocol: 'TCP' }];
  const objects = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: service.namespace } },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: service,
      spec: { ports: [{ name: 'https', port: 443, targetPort: at.port }] },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { ...service, labels: { 'kubernetes.io/service-name': service.name } },
      addressType: 'IPv4',
      endpoints: [{ addresses: [at.hostIP], conditions: { ready: true } }],
      ports,
    },
    {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: service,
      subsets: [{ addresses: [{ ip: at.hostIP }], ports }],
    },
    {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: METRICS_API_NAME },
      spec: {
        service: { ...service, port: 443 },
        group: 'external.metrics.k8s.io',
        version: 'v1beta1',
        caBundle,
        groupPriorityMinimum: 100,
        versionPriority: 100,
      },
    },
  ];
  await kubectlOk(['apply', '-f', '-'], {
    kubeconfig,
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
  });
  await eventually(
    async () => {
      const available = await kubectlOk(
        [
          'get',
          'apiservice',
          METRICS_API_NAME,
          '-o',
          'jsonpath={.status.conditions[?(@.type=="Available")].status}',
        ],
        { kubeconfig },
      );
      expect(available).toBe('True');
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}

export async function unregisterMetricsApi(kubeconfig: string): Promise<void> {
  await kubectl(['delete', 'apiservice', METRICS_API_NAME, '--ignore-not-found'], { kubeconfig });
  await kubectl(
    ['delete', 'namespace', METRICS_API_SERVICE.namespace, '--wait=false', '--ignore-not-found'],
    {
      kubeconfig,
    },
  );
}
