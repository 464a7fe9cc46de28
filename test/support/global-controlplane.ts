// vitest globalSetup of the integration project: one plain control plane (etcd +
// kube-apiserver) for the whole suite. Tests get it with inject('kubeconfig') or
// inject('controlPlane'), or via KUBECONFIG.
import type { TestProject } from 'vitest/node';
import { startControlPlane } from './controlplane.ts';
import type { ControlPlaneInfo } from './controlplane.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    kubeconfig: string;
    controlPlane: ControlPlaneInfo;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const log = (msg: string): void => void process.stderr.write(`[controlplane] ${msg}\n`);
  const cp = await startControlPlane({ log });
  const { kubeconfig, adminKubeconfig, server, version, binDir, dir } = cp;
  project.provide('kubeconfig', kubeconfig);
  project.provide('controlPlane', { kubeconfig, adminKubeconfig, server, version, binDir, dir });
  process.env['KUBECONFIG'] = kubeconfig;
  return async () => {
    await cp.stop();
    log(`stopped (${version})`);
  };
}
