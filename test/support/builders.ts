// Builders of cacheroute manifests for tests: a sample from examples/ with the
// changes a test needs, always runnable on fake GPU nodes (model files from a
// hostPath: KWOK pods need no volume, and no PVC has to exist).
import { loadSample, type Manifest } from './samples.ts';

export interface DeploymentOverrides {
  name?: string;
  sample?: string;
  replicas?: number;
  gpus?: number;
  spec?: Record<string, unknown>;
}

export function buildDeploymentManifest(o: DeploymentOverrides = {}): Manifest {
  const m = loadSample(o.sample ?? 'deployment-dense.yaml');
  if (o.name) m.metadata.name = o.name;
  const model = m.spec['model'] as { source: unknown };
  // The samples' digests are of no files here (the simulators stand in for SGLang): an operator
  // with a fetch image (the chart's) would hold the node's copy to them and never start a pod.
  model.source = { hostPath: { path: '/var/lib/cacheroute/models/staged/test', verify: false } };
  if (o.replicas !== undefined) m.spec['replicas'] = o.replicas;
  if (o.gpus !== undefined) (m.spec['resources'] as Record<string, unknown>)['gpus'] = o.gpus;
  Object.assign(m.spec, o.spec ?? {});
  return m;
}

export function buildCachePolicyManifest(
  name: string,
  targets: readonly string[],
  extra: Record<string, unknown> = {},
): Manifest {
  const m = loadSample('cachepolicy.yaml');
  m.metadata.name = name;
  m.spec['targetRefs'] = targets.map((t) => ({ kind: 'Deployment', name: t }));
  delete m.spec['warmup'];
  Object.assign(m.spec, extra);
  return m;
}
