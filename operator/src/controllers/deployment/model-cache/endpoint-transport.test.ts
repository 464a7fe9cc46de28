import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentSpec } from '#api';
import { loadSample } from '../../../../../test/support/samples.ts';
import { refuseInsecureEndpoint } from './endpoint-transport.ts';

function spec(source: DeploymentSpec['model']['source']): DeploymentSpec {
  const r = validateResource(loadSample('deployment-hicache.yaml'));
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error('bad sample');
  return { ...r.value.spec, model: { ...r.value.spec.model, source } };
}

const TOKEN = { name: 'hf', key: 'token' };

describe('refuseInsecureEndpoint', () => {
  it('refuses an http:// hub endpoint, naming the field, the host and the flag', () => {
    const message = refuseInsecureEndpoint(
      spec({ download: { endpoint: 'http://mirror.example:8080/hf', tokenSecretRef: TOKEN } }),
      [],
    );
    expect(message).toBe(
      'model.source.download.endpoint http://mirror.example:8080/hf is plain HTTP: the hub token would cross the network in clear. ' +
        "Use https://, or have the operator's admin list mirror.example in --insecure-endpoint-hosts " +
        '(chart: operator.modelCache.insecureEndpointHosts)',
    );
  });

  it('refuses an http:// object store endpoint', () => {
    const s = spec({ objectStore: { url: 's3://models/llama', endpoint: 'http://minio.storage:9000' } });
    expect(refuseInsecureEndpoint(s, ['other.example'])).toContain(
      "model.source.objectStore.endpoint http://minio.storage:9000 is plain HTTP: the store's access key id",
    );
  });

  it('allows https, the default endpoint, sources without one, and listed hosts (any case)', () => {
    expect(
      refuseInsecureEndpoint(spec({ download: { endpoint: 'https://hf.example' } }), []),
    ).toBeUndefined();
    expect(refuseInsecureEndpoint(spec({ download: {} }), [])).toBeUndefined();
    expect(refuseInsecureEndpoint(spec({ pvc: { claimName: 'models' } }), [])).toBeUndefined();
    const s = spec({ objectStore: { url: 's3://models/llama', endpoint: 'http://MinIO.storage:9000' } });
    expect(refuseInsecureEndpoint(s, ['minio.storage'])).toBeUndefined();
  });
});
