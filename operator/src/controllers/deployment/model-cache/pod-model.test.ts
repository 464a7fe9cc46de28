// How SGLang pods mount their model: a node cache and a verified hostPath get the fetcher as an
// init container before SGLang; the other sources mount as they did.
import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentSpec } from '#api';
import { loadSample } from '../../../../../test/support/samples.ts';
import { computeModelCacheKey, LABEL_MODEL_CACHE } from './names.ts';
import type { ModelCacheConfig } from './objects.ts';
import { buildPodModel, checksOnNode } from './pod-model.ts';

const CONFIG: ModelCacheConfig = {
  fetchImage: 'cacheroute/operator@sha256:abc',
  size: '200Gi',
  nodeRoot: '/mnt/nvme/models/',
};

function spec(source: DeploymentSpec['model']['source']): DeploymentSpec {
  const r = validateResource(loadSample('deployment-hicache.yaml'));
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error('bad sample');
  return { ...r.value.spec, model: { ...r.value.spec.model, source } };
}
const HUB = { endpoint: 'https://hf.example', tokenSecretRef: { name: 'hf', key: 'token' } };

describe('buildPodModel', () => {
  it('a node cache: a hostPath per key under the node root, filled by an init container holding the lock', () => {
    const s = spec({ download: { ...HUB, cache: 'Node' } });
    const key = computeModelCacheKey(s);
    const m = buildPodModel(s, CONFIG);
    expect(m.volumes.find((v) => v.name === 'model')?.hostPath).toEqual({
      path: `/mnt/nvme/models/${key}`,
      type: 'DirectoryOrCreate',
    });
    // SGLang reads the files only, from the model directory of the cache.
    expect(m.mounts).toEqual([{ name: 'model', mountPath: '/models', readOnly: true, subPath: 'model' }]);
    const [init] = m.initContainers;
    expect(init?.name).toBe('fetch');
    expect(init?.args?.join(' ')).toContain('--dest /cache/model');
    expect(init?.args?.join(' ')).toContain('--lock-file /cache/.fetch.lock');
    expect(init?.volumeMounts?.map((v) => [v.name, v.mountPath, v.readOnly ?? false])).toEqual([
      ['model', '/cache', false],
      ['hub-token', '/var/run/cacheroute/hub-token', true],
      ['fetch-tmp', '/tmp', false],
    ]);
    // The token is the init container's alone.
    expect(m.mounts.some((v) => v.name === 'hub-token')).toBe(false);
    expect(init?.securityContext).toMatchObject({
      runAsUser: 0,
      capabilities: { drop: ['ALL'] },
      allowPrivilegeEscalation: false,
    });
    expect(m.labels).toEqual({ [LABEL_MODEL_CACHE]: key });
  });

  it('a hostPath source is verified before SGLang unless verify is false: read-only, the record on the node', () => {
    const s = spec({ hostPath: { path: '/data/qwen' } });
    const m = buildPodModel(s, CONFIG);
    const [init] = m.initContainers;
    expect(init?.args?.slice(0, 1)).toEqual(['--verify-only']);
    expect(init?.args?.slice(-2)).toEqual(['--marker-dir', '/var/run/cacheroute/verify-state']);
    expect(init?.volumeMounts?.slice(0, 2)).toEqual([
      { name: 'model', mountPath: '/models', readOnly: true },
      { name: 'verify-state', mountPath: '/var/run/cacheroute/verify-state' },
    ]);
    const key = m.labels[LABEL_MODEL_CACHE] ?? '';
    expect(m.volumes.find((v) => v.name === 'verify-state')?.hostPath).toEqual({
      path: `/mnt/nvme/models/verified/${key}`,
      type: 'DirectoryOrCreate',
    });
    const off = spec({ hostPath: { path: '/data/qwen', verify: false } });
    expect(buildPodModel(off, CONFIG).initContainers).toEqual([]);
    expect(checksOnNode(off, CONFIG)).toBe(false);
  });

  it("an object store node cache: the init container fetches the prefix with the Secret's keys as its env only", () => {
    const s = spec({
      objectStore: { url: 's3://models/qwen', cache: 'Node', credentialsSecretRef: { name: 's3-reader' } },
    });
    const m = buildPodModel(s, CONFIG);
    const [init] = m.initContainers;
    expect(init?.args?.slice(0, 2)).toEqual(['--object-store', 's3://models/qwen']);
    expect(init?.args?.join(' ')).toContain('--lock-file /cache/.fetch.lock');
    expect(init?.env?.map((e) => [e.name, e.valueFrom?.secretKeyRef?.name])).toEqual([
      ['POD_IP', undefined],
      ['AWS_ACCESS_KEY_ID', 's3-reader'],
      ['AWS_SECRET_ACCESS_KEY', 's3-reader'],
      ['AWS_SESSION_TOKEN', 's3-reader'],
    ]);
    expect(m.volumes.find((v) => v.name === 'model')?.hostPath?.path).toBe(
      `/mnt/nvme/models/${computeModelCacheKey(s)}`,
    );
    expect(checksOnNode(s, CONFIG)).toBe(true);
    // Shared: the fetch Job's cache, mounted; no init container.
    const shared = buildPodModel(spec({ objectStore: { url: 's3://models/qwen' } }), CONFIG);
    expect(shared.initContainers).toEqual([]);
    expect(shared.volumes[0]?.persistentVolumeClaim?.readOnly).toBe(true);
  });

  it('without a fetch image, or for a pvc or Shared download, no init container', () => {
    expect(buildPodModel(spec({ hostPath: { path: '/data/qwen' } }), undefined).initContainers).toEqual([]);
    expect(
      buildPodModel(spec({ download: { ...HUB, cache: 'Node' } }), undefined).volumes[0]
        ?.persistentVolumeClaim,
    ).toBeDefined();
    expect(buildPodModel(spec({ pvc: { claimName: 'models' } }), CONFIG).initContainers).toEqual([]);
    const shared = buildPodModel(spec({ download: HUB }), CONFIG);
    expect(shared.initContainers).toEqual([]);
    expect(shared.volumes[0]?.persistentVolumeClaim?.readOnly).toBe(true);
  });
});
