import { describe, expect, it } from 'vitest';
import { DeploymentResource } from '#api/resources.ts';
import { loadSample } from '../../../../test/support/samples.ts';
import { checkArms } from './arms.ts';

type Mutable = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- each case edits a manifest its own way

function deployment(
  name: string,
  edit: (spec: Mutable) => void = () => {},
  verified = true,
): DeploymentResource {
  const m = loadSample('deployment-dense.yaml') as Mutable;
  m['metadata'] = { name, namespace: 'ns' };
  edit(m['spec'] as Mutable);
  const d = DeploymentResource.parse(m);
  if (!verified) return d;
  const fingerprint = `fp-${name}`;
  return {
    ...d,
    status: {
      identity: { deploymentId: d.spec.deploymentId, fingerprint },
      endpoints: [
        {
          pod: `${name}-1`,
          ip: '10.0.0.2',
          port: 30000,
          role: 'standalone',
          ready: true,
          verified: true,
          fingerprint,
        },
        {
          pod: `${name}-0`,
          ip: '10.0.0.1',
          port: 30000,
          role: 'standalone',
          ready: true,
          verified: true,
          fingerprint,
        },
      ],
    },
  };
}

const ARMS = [
  { name: 'dense', deployment: 'd' },
  { name: 'hicache', deployment: 'h' },
] as const;
const hicache = (s: Mutable) => {
  s['profile'] = 'hicache';
  s['hicache'] = { ratio: 2 };
};

describe('checkArms', () => {
  it('accepts arms that differ only in the declared profile, on one pinned endpoint each', () => {
    const r = checkArms(ARMS, [deployment('d'), deployment('h', hicache)], ['Profile']);
    expect(r.kind).toBe('ready');
    if (r.kind !== 'ready') return;
    expect(r.arms[0].endpoint).toEqual({ pod: 'd-0', url: 'http://10.0.0.1:30000' });
    expect(r.arms[1].gpus).toBe(1);
  });

  it('names a difference the subject does not cover, with both values', () => {
    const r = checkArms(ARMS, [deployment('d'), deployment('h', hicache)], ['Serving']);
    expect(r.kind).toBe('mismatch');
    expect(r.kind === 'mismatch' && r.differences.find((d) => d.startsWith('profile:'))).toBe(
      'profile: dense="dense" hicache="hicache"',
    );
  });

  it('never lets the model, tokenizer, image, topology or hardware differ', () => {
    const other = deployment('h', (s) => {
      hicache(s);
      s['model'] = { ...(s['model'] as Mutable), digest: `sha256:${'a'.repeat(64)}` };
      s['runtime'] = { ...(s['runtime'] as Mutable), image: `lmsysorg/sglang@sha256:${'b'.repeat(64)}` };
      s['parallelism'] = { tensor: 2 };
      s['resources'] = { gpus: 2 };
    });
    const r = checkArms(ARMS, [deployment('d'), other], ['Profile', 'Serving', 'RuntimeArgs']);
    expect(r.kind === 'mismatch' && r.differences.map((d) => d.split(':')[0])).toEqual([
      'model.digest',
      'runtime.image digest',
      'topology',
      'hardware',
    ]);
  });

  it('waits, without refusing, for an arm not verified yet', () => {
    const r = checkArms(ARMS, [deployment('d'), deployment('h', hicache, false)], ['Profile']);
    expect(r).toMatchObject({ kind: 'waiting' });
    expect(checkArms(ARMS, [deployment('d'), undefined], ['Profile'])).toEqual({
      kind: 'waiting',
      message: 'Deployment h not found',
    });
  });

  describe('prefill/decode arms', () => {
    const pd =
      (prefillProfile: string, transferBackend = 'mooncake') =>
      (s: Mutable) => {
        for (const k of ['replicas', 'profile', 'radixCache', 'hicache', 'hisparse']) delete s[k];
        s['disaggregation'] = {
          transferBackend,
          prefill: {
            replicas: 1,
            profile: prefillProfile,
            ...(prefillProfile === 'hicache' ? { hicache: { ratio: 2 } } : {}),
          },
          decode: { replicas: 1 },
        };
      };
    /** A verified pair: prefill p-1 and p-0, decode q-0 (the first of each by pod name is measured). */
    const paired = (d: DeploymentResource): DeploymentResource => {
      const fingerprint = d.status?.identity?.fingerprint ?? '';
      const ep = (pod: string, role: 'prefill' | 'decode', ip: string) => ({
        pod,
        ip,
        port: 30000,
        role,
        ready: true,
        verified: true,
        fingerprint,
        ...(role === 'prefill' ? { bootstrapPort: 8998 } : {}),
      });
      return {
        ...d,
        status: {
          ...d.status,
          endpoints: [
            ep('p-1', 'prefill', '10.0.1.2'),
            ep('p-0', 'prefill', '10.0.1.1'),
            ep('q-0', 'decode', '10.0.2.1'),
          ],
        },
      };
    };

    it('measures the first decode, paired with the first prefill through its bootstrap server', () => {
      const r = checkArms(
        ARMS,
        [paired(deployment('d', pd('dense'))), paired(deployment('h', pd('hicache')))],
        ['Profile'],
      );
      expect(r.kind).toBe('ready');
      if (r.kind !== 'ready') return;
      expect(r.arms[1].endpoint).toEqual({
        pod: 'q-0',
        url: 'http://10.0.2.1:30000',
        prefill: { pod: 'p-0', url: 'http://10.0.1.1:30000', bootstrapHost: '10.0.1.1', bootstrapPort: 8998 },
      });
      // A pair is a prefill pod and a decode pod.
      expect(r.arms[1].gpus).toBe(2);
    });

    it('refuses a pair against a standalone arm, or pairs that move KV differently', () => {
      const mixed = checkArms(ARMS, [deployment('d'), paired(deployment('h', pd('hicache')))], ['Profile']);
      expect(
        mixed.kind === 'mismatch' && mixed.differences.some((d) => d.startsWith('topology: disaggregated')),
      ).toBe(true);
      const transfer = checkArms(
        ARMS,
        [paired(deployment('d', pd('dense', 'nixl'))), paired(deployment('h', pd('hicache')))],
        ['Profile'],
      );
      expect(transfer.kind === 'mismatch' && transfer.differences).toEqual([
        expect.stringMatching(/^topology: disaggregation transfer and part resources: dense=.*"nixl"/),
      ]);
    });

    it('waits for a pair with no decode yet', () => {
      const d = paired(deployment('h', pd('hicache')));
      const noDecode = {
        ...d,
        status: { ...d.status, endpoints: d.status?.endpoints?.filter((e) => e.role === 'prefill') },
      };
      expect(
        checkArms(ARMS, [paired(deployment('d', pd('dense'))), noDecode as DeploymentResource], ['Profile']),
      ).toMatchObject({
        kind: 'waiting',
        message: 'Deployment h has no ready, verified prefill/decode pair',
      });
    });
  });
});
