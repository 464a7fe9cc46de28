import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentSpec } from '#api';
import { loadSample } from '../../../../../test/support/samples.ts';
import { buildFetchJob, type ModelCacheConfig } from './objects.ts';
import {
  ANNOTATION_VERIFIED,
  buildFetchJobName,
  buildModelCacheName,
  buildVerifyJobName,
  computeModelCacheKey,
  computeStagedKey,
} from './names.ts';
import {
  computeFailureReason,
  ModelReason,
  planModelDelivery,
  type FetchPodObject,
  type JobObject,
  type ModelDeliveryObservation,
  type PvcObject,
} from './plan.ts';

const NOW = new Date('2026-12-02T21:00:00Z');
const CONFIG: ModelCacheConfig = { fetchImage: 'cacheroute/operator@sha256:abc', size: '200Gi' };

function downloadSpec(over: (s: DeploymentSpec) => DeploymentSpec = (s) => s): DeploymentSpec {
  const r = validateResource(loadSample('deployment-hicache.yaml'));
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error('bad sample');
  return over(r.value.spec);
}
const SPEC = downloadSpec();
const KEY = computeModelCacheKey(SPEC);
const CACHE = buildModelCacheName(KEY);
const JOB = buildFetchJobName(KEY);

const pvc = (over: { bound?: boolean; annotations?: Record<string, string> } = {}): PvcObject => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name: CACHE, namespace: 'ns', uid: 'pvc-uid', annotations: over.annotations ?? {} },
  spec: { storageClassName: 'shared' },
  status: { phase: over.bound === false ? 'Pending' : 'Bound' },
});
const job = (condition?: 'Complete' | 'Failed', reason = ''): JobObject => ({
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: { name: JOB, namespace: 'ns', uid: 'job-uid' },
  status: condition
    ? { conditions: [{ type: condition, status: 'True', reason, message: 'm' }] }
    : { active: 1 },
});
const pod = (name: string, phase: string, exitCode?: number, message?: string): FetchPodObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'ns', creationTimestamp: `2026-12-02T20:0${name.slice(-1)}:00Z` },
  status: {
    phase,
    containerStatuses: [
      {
        name: 'fetch',
        image: 'x',
        imageID: '',
        ready: false,
        restartCount: 0,
        ...(exitCode !== undefined
          ? { state: { terminated: { exitCode, ...(message ? { message } : {}) } } }
          : {}),
      },
    ],
  },
});
const done = JSON.stringify({
  phase: 'done',
  ok: true,
  digest: SPEC.model.digest,
  tokenizerDigest: SPEC.model.tokenizerDigest,
  files: 4,
  bytes: 1234,
  downloadedBytes: 1234,
  fromMarker: false,
});
const mismatch = JSON.stringify({
  phase: 'failed',
  ok: false,
  reason: 'ModelDigestMismatch',
  message: 'model-00001.safetensors: sha256 aa…, the listing says bb…',
  path: 'model-00001.safetensors',
});

const observe = (o: Partial<ModelDeliveryObservation> = {}): ModelDeliveryObservation => ({
  namespace: 'ns',
  spec: SPEC,
  config: CONFIG,
  cache: undefined,
  job: undefined,
  pods: [],
  owners: [{ apiVersion: 'cacheroute.dev/v1alpha1', kind: 'Deployment', name: 'qwen-32b', uid: 'd1' }],
  deployment: { name: 'qwen-32b', uid: 'd1' },
  now: NOW,
  ...o,
});

describe('planModelDelivery', () => {
  it('refuses an http:// endpoint whose host the operator does not list: nothing is made, the condition says what to change', () => {
    const spec = downloadSpec((s) => ({
      ...s,
      model: {
        ...s.model,
        source: { download: { endpoint: 'http://mirror.example', tokenSecretRef: { name: 'hf', key: 't' } } },
      },
    }));
    const refused = planModelDelivery(observe({ spec }));
    expect(refused).toMatchObject({
      ready: false,
      actions: [],
      status: { phase: 'Failed', reason: 'InsecureEndpoint' },
      condition: { status: 'False', reason: 'InsecureEndpoint' },
    });
    expect(refused.condition.message).toContain('--insecure-endpoint-hosts');
    // Node caches fetch in an init container: refused before any pod is made, too.
    const onNode = downloadSpec((s) => ({
      ...s,
      model: { ...s.model, source: { download: { endpoint: 'http://mirror.example', cache: 'Node' } } },
    }));
    expect(planModelDelivery(observe({ spec: onNode })).condition.reason).toBe('InsecureEndpoint');
    const listed = { ...CONFIG, insecureEndpointHosts: ['mirror.example'] };
    expect(planModelDelivery(observe({ spec, config: listed })).actions.map((a) => a.kind)).toEqual([
      'createCache',
    ]);
  });

  it('verifies a hostPath source in each pod, or mounts it as it is and says why', () => {
    const hostPath = (verify?: boolean) =>
      downloadSpec((s) => ({
        ...s,
        model: {
          ...s.model,
          source: { hostPath: { path: '/data/models/qwen', ...(verify === undefined ? {} : { verify }) } },
        },
      }));
    expect(planModelDelivery(observe({ spec: hostPath() }))).toMatchObject({
      ready: true,
      condition: { status: 'False', reason: 'Verifying' },
    });
    for (const [spec, config, why] of [
      [hostPath(false), CONFIG, 'hostPath.verify is false'],
      [hostPath(), undefined, 'without --model-fetch-image'],
    ] as const) {
      const plan = planModelDelivery(observe({ spec, config }));
      expect(plan).toMatchObject({
        ready: true,
        actions: [],
        condition: { status: 'True', reason: 'PreStaged' },
      });
      expect(plan.condition.message).toContain('node path /data/models/qwen');
      expect(plan.condition.message).toContain(why);
    }
  });

  describe('a pvc source', () => {
    const staged = downloadSpec((s) => ({
      ...s,
      model: { ...s.model, source: { pvc: { claimName: 'models', subPath: 'qwen' } } },
    }));
    const verifyJob = buildVerifyJobName('qwen-32b', computeStagedKey(staged));
    const created = (spec = staged) => {
      const [a] = planModelDelivery(observe({ spec })).actions;
      return a?.kind === 'createJob' ? a.job : undefined;
    };

    it('is verified by a Job of its own before any SGLang pod: the claim read-only, as the pods mount it', () => {
      const plan = planModelDelivery(observe({ spec: staged }));
      expect(plan).toMatchObject({ ready: false, condition: { status: 'False', reason: 'Pending' } });
      const job = created();
      expect(job?.metadata?.name).toBe(verifyJob);
      expect(job?.metadata?.ownerReferences).toEqual([
        {
          apiVersion: 'cacheroute.dev/v1alpha1',
          kind: 'Deployment',
          name: 'qwen-32b',
          uid: 'd1',
          controller: true,
        },
      ]);
      const pod = job?.spec?.template.spec;
      expect(pod?.volumes?.find((v) => v.name === 'model')?.persistentVolumeClaim).toEqual({
        claimName: 'models',
        readOnly: true,
      });
      expect(pod?.containers[0]?.volumeMounts?.find((m) => m.name === 'model')).toEqual({
        name: 'model',
        mountPath: '/models',
        readOnly: true,
        subPath: 'qwen',
      });
      // No recursive chown of the user's volume.
      expect(pod?.securityContext?.fsGroup).toBeUndefined();
      const args = pod?.containers[0]?.args ?? [];
      expect(args.slice(0, 5)).toEqual([
        '--verify-only',
        '--digest',
        staged.model.digest,
        '--tokenizer-digest',
        staged.model.tokenizerDigest,
      ]);
      expect(args).not.toContain('--repo');
    });

    it('a new claim, subPath or digest is a new verification', () => {
      const other = downloadSpec((s) => ({
        ...s,
        model: { ...s.model, source: { pvc: { claimName: 'models', subPath: 'qwen-2' } } },
      }));
      expect(created(other)?.metadata?.name).not.toBe(verifyJob);
      expect(computeStagedKey(other)).not.toBe(computeStagedKey(staged));
    });

    it('is Verifying while the Job runs, with its progress', () => {
      const plan = planModelDelivery(
        observe({
          spec: staged,
          job: { ...job(), metadata: { name: verifyJob, namespace: 'ns' } },
          progress: { phase: 'verifying', filesDone: 1, filesTotal: 4, bytesDone: 10, bytesTotal: 40 },
        }),
      );
      expect(plan.status).toMatchObject({ phase: 'Verifying', progress: 0.25, job: verifyJob });
      expect(plan.condition.message).toBe(
        `Job ${verifyJob} verifies the files on PersistentVolumeClaim models (subPath qwen): verifying, 25% (0.0 MiB of 0.0 MiB), 1 of 4 files`,
      );
    });

    it('records a completed verification on its Job, and from then on needs no Job run', () => {
      const finished = { ...job('Complete'), metadata: { name: verifyJob, namespace: 'ns' } };
      const plan = planModelDelivery(
        observe({ spec: staged, job: finished, pods: [pod('p1', 'Succeeded', 0, done)] }),
      );
      expect(plan.ready).toBe(true);
      expect(plan.condition).toMatchObject({ status: 'True', reason: 'Verified' });
      expect(plan.condition.message).toContain('in PersistentVolumeClaim models (subPath qwen) match');
      const [a] = plan.actions;
      expect(a).toMatchObject({ kind: 'recordVerified', on: 'job', name: verifyJob });
      if (a?.kind !== 'recordVerified') return;
      // The record read back: Verified with no pod left (a pod garbage-collected, an operator restart).
      const recorded = {
        ...finished,
        metadata: { ...finished.metadata, annotations: { [ANNOTATION_VERIFIED]: JSON.stringify(a.record) } },
      };
      expect(planModelDelivery(observe({ spec: staged, job: recorded }))).toMatchObject({
        ready: true,
        actions: [],
        status: { phase: 'Verified', job: verifyJob },
      });
    });

    it('fails as a fetch does when the files are not the pinned ones, saying how to verify again', () => {
      const failed = { ...job('Failed', 'PodFailurePolicy'), metadata: { name: verifyJob, namespace: 'ns' } };
      const plan = planModelDelivery(
        observe({ spec: staged, job: failed, pods: [pod('p1', 'Failed', 3, mismatch)] }),
      );
      expect(plan).toMatchObject({
        ready: false,
        condition: { status: 'False', reason: 'ModelDigestMismatch' },
      });
      expect(plan.condition.message).toContain(`delete Job ${verifyJob} to verify again`);
    });

    it('is mounted unchecked, and says so, by an operator without a fetch image', () => {
      const plan = planModelDelivery(observe({ spec: staged, config: undefined }));
      expect(plan).toMatchObject({ ready: true, condition: { status: 'True', reason: 'PreStaged' } });
      expect(plan.condition.message).toContain('without --model-fetch-image');
    });
  });

  it('creates the cache first, owned by every user and controlled by none', () => {
    const plan = planModelDelivery(observe());
    expect(plan.ready).toBe(false);
    expect(plan.condition).toMatchObject({ status: 'False', reason: 'Pending' });
    const [a] = plan.actions;
    expect(a?.kind).toBe('createCache');
    if (a?.kind !== 'createCache') return;
    expect(a.pvc.metadata?.name).toBe(CACHE);
    expect(a.pvc.spec?.accessModes).toEqual(['ReadWriteMany']);
    expect(a.pvc.spec?.resources?.requests).toEqual({ storage: '80Gi' });
    expect(a.pvc.metadata?.ownerReferences?.map((r) => [r.uid, r.controller])).toEqual([['d1', undefined]]);
  });

  it.each([
    ['the spec', 'from-spec', 'from-flag', 'from-spec'],
    ['the operator flag', undefined, 'from-flag', 'from-flag'],
    ['the default class', undefined, undefined, undefined],
  ])('takes the storage class from %s', (_from, inSpec, inConfig, expected) => {
    const spec = downloadSpec((s) => ({
      ...s,
      model: { ...s.model, source: { download: { ...s.model.source.download, storageClassName: inSpec } } },
    }));
    const [a] = planModelDelivery(
      observe({ spec, config: { ...CONFIG, storageClassName: inConfig } }),
    ).actions;
    expect(a?.kind === 'createCache' ? a.pvc.spec?.storageClassName : 'no cache').toBe(expected);
  });

  it('then the Job, controlled by the cache', () => {
    const plan = planModelDelivery(observe({ cache: pvc() }));
    const [a] = plan.actions;
    expect(a?.kind).toBe('createJob');
    if (a?.kind !== 'createJob') return;
    expect(a.job.metadata?.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'PersistentVolumeClaim', name: CACHE, uid: 'pvc-uid', controller: true },
    ]);
  });

  it('is Fetching while the Job runs, Pending while the volume is unbound', () => {
    expect(planModelDelivery(observe({ cache: pvc(), job: job() }))).toMatchObject({
      ready: false,
      actions: [],
      status: { phase: 'Fetching' },
      condition: { reason: 'Fetching' },
    });
    const unbound = planModelDelivery(observe({ cache: pvc({ bound: false }), job: job() }));
    expect(unbound.condition).toMatchObject({ reason: 'Pending' });
    expect(unbound.condition.message).toContain('storage class shared');
  });

  it("shows the running pod's progress while it fetches: bytes, files, a fraction and words", () => {
    const progress = {
      phase: 'weights',
      filesDone: 2,
      filesTotal: 4,
      bytesDone: 3 * 1024 * 1024 + 5,
      bytesTotal: 6 * 1024 * 1024,
    } as const;
    const plan = planModelDelivery(observe({ cache: pvc(), job: job(), progress }));
    expect(plan.status).toMatchObject({
      phase: 'Fetching',
      files: 4,
      bytesDone: progress.bytesDone,
      bytesTotal: progress.bytesTotal,
      progress: 0.5,
    });
    expect(plan.condition.message).toBe(
      `Job ${JOB} fetches ${SPEC.model.path}@${SPEC.model.revision ?? ''}: weights, 50% (3.0 MiB of 6.0 MiB), 2 of 4 files`,
    );
    // Nothing read: no numbers are made up.
    const unread = planModelDelivery(observe({ cache: pvc(), job: job() }));
    expect(unread.status.bytesDone).toBeUndefined();
    expect(unread.status.progress).toBeUndefined();
    // A volume not bound yet runs no fetch: a stale reading is not shown.
    expect(
      planModelDelivery(observe({ cache: pvc({ bound: false }), job: job(), progress })).status.progress,
    ).toBeUndefined();
  });

  it('records the verified result of a completed Job on the cache and is ready', () => {
    const plan = planModelDelivery(
      observe({ cache: pvc(), job: job('Complete'), pods: [pod('p1', 'Succeeded', 0, done)] }),
    );
    expect(plan.ready).toBe(true);
    expect(plan.condition).toMatchObject({ status: 'True', reason: 'Verified' });
    expect(plan.status).toMatchObject({ phase: 'Verified', files: 4, bytesTotal: 1234, progress: 1 });
    expect(plan.actions).toEqual([
      {
        kind: 'recordVerified',
        on: 'cache',
        name: CACHE,
        record: {
          digest: SPEC.model.digest,
          tokenizerDigest: SPEC.model.tokenizerDigest,
          files: 4,
          bytes: 1234,
          verifiedAt: NOW.toISOString(),
          job: JOB,
        },
      },
    ]);
  });

  it('is ready from the record alone: a restart or a scale-up needs no Job and makes none', () => {
    const record = JSON.stringify({
      digest: SPEC.model.digest,
      tokenizerDigest: SPEC.model.tokenizerDigest,
      files: 4,
      bytes: 1234,
      verifiedAt: NOW.toISOString(),
      job: JOB,
    });
    const plan = planModelDelivery(
      observe({ cache: pvc({ annotations: { [ANNOTATION_VERIFIED]: record } }) }),
    );
    expect(plan).toMatchObject({ ready: true, actions: [], status: { phase: 'Verified' } });
  });

  it('does not trust a record of other digests, nor a malformed one', () => {
    for (const text of [
      '{',
      JSON.stringify({
        digest: 'sha256:00',
        tokenizerDigest: 'x',
        files: 1,
        bytes: 1,
        verifiedAt: 'x',
        job: 'j',
      }),
    ]) {
      const plan = planModelDelivery(
        observe({ cache: pvc({ annotations: { [ANNOTATION_VERIFIED]: text } }) }),
      );
      expect(plan.ready).toBe(false);
      expect(plan.actions.map((a) => a.kind)).toEqual(['createJob']);
    }
  });

  it('does not trust a Job that completed without a result (as a fake node completing it would)', () => {
    const plan = planModelDelivery(
      observe({ cache: pvc(), job: job('Complete'), pods: [pod('p1', 'Succeeded', 0)] }),
    );
    expect(plan).toMatchObject({
      ready: false,
      actions: [],
      condition: { status: 'False', reason: 'FetchFailed' },
    });
    expect(plan.condition.message).toContain('not trusted');
  });

  it('names the first bad file of a mismatch, and how to try again', () => {
    const plan = planModelDelivery(
      observe({
        cache: pvc(),
        job: job('Failed', 'PodFailurePolicy'),
        pods: [pod('p1', 'Failed', 3, mismatch)],
      }),
    );
    expect(plan).toMatchObject({
      ready: false,
      actions: [],
      status: { phase: 'Failed', path: 'model-00001.safetensors' },
      condition: { status: 'False', reason: 'ModelDigestMismatch' },
    });
    expect(plan.condition.message).toContain('file model-00001.safetensors');
    expect(plan.condition.message).toContain(`delete Job ${JOB}`);
  });

  it('reads the result from a log tail (FallbackToLogsOnError) and says a retry is under way', () => {
    const tail = `{"phase":"weights","filesDone":1,"filesTotal":4,"bytesDone":1,"bytesTotal":9}\n${JSON.stringify({ phase: 'failed', ok: false, reason: 'DownloadFailed', message: 'connection reset' })}\nmodel-fetch: DownloadFailed: connection reset\n`;
    const plan = planModelDelivery(
      observe({ cache: pvc(), job: job(), pods: [pod('p1', 'Failed', 1, tail), pod('p2', 'Running')] }),
    );
    expect(plan.condition).toMatchObject({ status: 'False', reason: 'Fetching' });
    expect(plan.condition.message).toContain('attempt 1 failed: DownloadFailed: connection reset');
  });

  it.each([
    ['HubUnauthorized', 'SourceUnreadable'],
    ['HubNotFound', 'SourceUnreadable'],
    ['UnexpectedFiles', 'ModelDigestMismatch'],
    ['DownloadFailed', 'FetchFailed'],
    ['InvalidArguments', 'FetchFailed'],
    ['HubInvalidListing', 'FetchFailed'],
  ])('maps the fetcher reason %s to %s', (fetcher, reason) => {
    expect(computeFailureReason(fetcher)).toBe(reason);
  });

  it('fails clearly without a fetch image, or with a tokenizer outside the repository', () => {
    expect(planModelDelivery(observe({ config: undefined })).condition.reason).toBe('FetcherNotConfigured');
    const spec = downloadSpec((s) => ({ ...s, model: { ...s.model, tokenizerPath: '/tokenizers/qwen' } }));
    const plan = planModelDelivery(observe({ spec }));
    expect(plan.condition).toMatchObject({ status: 'False', reason: 'SourceUnreadable' });
    expect(plan.actions).toEqual([]);
  });
});

describe('planModelDelivery, files checked on each node', () => {
  const nodeSpec = downloadSpec((s) => ({
    ...s,
    model: {
      ...s.model,
      source: { download: { ...s.model.source.download, cache: 'Node', sizeLimit: undefined } },
    },
  }));
  const nodePod = (
    name: string,
    node: string,
    exitCode?: number,
    message?: string,
    restarted = false,
  ): FetchPodObject => {
    const terminated = exitCode === undefined ? undefined : { exitCode, ...(message ? { message } : {}) };
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'ns' },
      spec: { nodeName: node, containers: [] },
      status: {
        phase: 'Pending',
        initContainerStatuses: [
          {
            name: 'fetch',
            image: 'x',
            imageID: '',
            ready: exitCode === 0,
            restartCount: restarted ? 1 : 0,
            ...(terminated
              ? restarted
                ? { lastState: { terminated }, state: { running: {} } }
                : { state: { terminated } }
              : {}),
          },
        ],
      },
    };
  };

  it('applies the workloads at once (the pods fetch) and is Fetching until a pod verified', () => {
    const plan = planModelDelivery(observe({ spec: nodeSpec, nodePods: [nodePod('a', 'n1')] }));
    expect(plan).toMatchObject({
      ready: true,
      actions: [],
      condition: { status: 'False', reason: 'Fetching' },
    });
    expect(plan.condition.message).toContain('0 of 1 pods verified yet');
  });

  it("shows the furthest pod's progress while none verified", () => {
    const plan = planModelDelivery(
      observe({
        spec: nodeSpec,
        nodePods: [nodePod('a', 'n1'), nodePod('b', 'n2')],
        nodeProgress: new Map([
          ['a', { phase: 'weights', filesDone: 2, filesTotal: 4, bytesDone: 10, bytesTotal: 100 }],
          ['b', { phase: 'weights', filesDone: 3, filesTotal: 4, bytesDone: 60, bytesTotal: 100 }],
        ]),
      }),
    );
    expect(plan.status).toMatchObject({ phase: 'Fetching', progress: 0.6, bytesDone: 60 });
    expect(plan.condition.message).toContain('0 of 2 pods verified yet; pod b on node n2: weights, 60%');
  });

  it('is Verified once a pod verified the pinned files on its node', () => {
    const plan = planModelDelivery(
      observe({ spec: nodeSpec, nodePods: [nodePod('a', 'n1', 0, done), nodePod('b', 'n2')] }),
    );
    expect(plan).toMatchObject({ ready: true, condition: { status: 'True', reason: 'Verified' } });
    expect(plan.condition.message).toContain('1 of 2 pods verified');
    expect(plan.status).toMatchObject({ phase: 'Verified', files: 4, digest: SPEC.model.digest });
  });

  it("names the pod, its node and the bad file when a node's files are not the pinned ones, also after a restart", () => {
    for (const restarted of [false, true]) {
      const plan = planModelDelivery(
        observe({
          spec: nodeSpec,
          nodePods: [nodePod('a', 'n1', 0, done), nodePod('b', 'n2', 3, mismatch, restarted)],
        }),
      );
      expect(plan).toMatchObject({
        ready: true,
        condition: { status: 'False', reason: 'ModelDigestMismatch' },
      });
      expect(plan.condition.message).toMatch(
        /^pod b on node n2: ModelDigestMismatch: file model-00001\.safetensors/,
      );
      expect(plan.status.path).toBe('model-00001.safetensors');
    }
  });

  it('without a fetch image a node cache cannot be filled', () => {
    expect(planModelDelivery(observe({ spec: nodeSpec, config: undefined })).condition.reason).toBe(
      'FetcherNotConfigured',
    );
  });
});

describe('buildFetchJob', () => {
  const input = (spec: DeploymentSpec) => ({
    namespace: 'ns',
    key: KEY,
    spec,
    tokenizerSubpath: undefined,
    config: CONFIG,
    cache: { name: CACHE, uid: 'pvc-uid' },
  });

  it('mounts the token as a file for the fetcher only: no env, no argument holds it', () => {
    const j = buildFetchJob(input(SPEC));
    const pod = j.spec?.template.spec;
    const c = pod?.containers[0];
    expect(pod?.automountServiceAccountToken).toBe(false);
    // Its only variable is its own IP, where it serves its progress.
    expect(c?.env).toEqual([{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }]);
    expect(c?.args?.join(' ')).toContain('--progress-host $(POD_IP) --progress-port 8497');
    expect(c?.ports).toEqual([{ name: 'progress', containerPort: 8497, protocol: 'TCP' }]);
    expect(c?.args).toContain('--token-file');
    expect(pod?.volumes?.find((v) => v.name === 'hub-token')?.secret).toEqual({
      secretName: 'hf-token',
      items: [{ key: 'token', path: 'token' }],
      defaultMode: 0o400,
    });
    expect(c?.command).toEqual(['node', 'fetcher/src/main.ts']);
    expect(c?.args?.slice(0, 2)).toEqual(['--endpoint', 'https://huggingface.co']);
    expect(j.spec?.podFailurePolicy?.rules[0]?.onExitCodes?.values).toEqual([2, 3]);
  });

  it('takes the mirror and the proxy of the source', () => {
    const spec = downloadSpec((s) => ({
      ...s,
      model: {
        ...s.model,
        source: { download: { endpoint: 'https://mirror.example/hf', proxy: 'http://proxy.example:3128' } },
      },
    }));
    const args = buildFetchJob(input(spec)).spec?.template.spec?.containers[0]?.args ?? [];
    expect(args.slice(0, 2)).toEqual(['--endpoint', 'https://mirror.example/hf']);
    expect(args.slice(args.indexOf('--proxy'), args.indexOf('--proxy') + 2)).toEqual([
      '--proxy',
      'http://proxy.example:3128',
    ]);
    expect(args).not.toContain('--token-file');
  });
});

describe('buildFetchJob for an object store', () => {
  const storeSpec = (objectStore: NonNullable<DeploymentSpec['model']['source']['objectStore']>) =>
    downloadSpec((s) => {
      const { revision: _revision, ...model } = s.model;
      return { ...s, model: { ...model, source: { objectStore } } };
    });
  const jobOf = (spec: DeploymentSpec) =>
    buildFetchJob({
      namespace: 'ns',
      key: computeModelCacheKey(spec),
      spec,
      tokenizerSubpath: undefined,
      config: CONFIG,
      cache: { name: CACHE, uid: 'pvc-uid' },
    });

  it('fetches the prefix from the endpoint, the keys from the Secret as env only, under the service account', () => {
    const spec = storeSpec({
      url: 's3://models/llama-3.1-8b',
      endpoint: 'http://minio.storage:9000',
      region: 'eu-west-1',
      forcePathStyle: true,
      credentialsSecretRef: { name: 's3-reader' },
      serviceAccountName: 'model-reader',
      proxy: 'http://proxy.example:3128',
    });
    const pod = jobOf(spec).spec?.template.spec;
    const c = pod?.containers[0];
    expect(c?.args?.slice(0, 7)).toEqual([
      '--object-store',
      's3://models/llama-3.1-8b',
      '--store-endpoint',
      'http://minio.storage:9000',
      '--store-region',
      'eu-west-1',
      '--store-path-style',
    ]);
    expect(c?.args).toContain('--proxy');
    expect(c?.args).not.toContain('--repo');
    expect(c?.env?.slice(1)).toEqual([
      {
        name: 'AWS_ACCESS_KEY_ID',
        valueFrom: { secretKeyRef: { name: 's3-reader', key: 'AWS_ACCESS_KEY_ID' } },
      },
      {
        name: 'AWS_SECRET_ACCESS_KEY',
        valueFrom: { secretKeyRef: { name: 's3-reader', key: 'AWS_SECRET_ACCESS_KEY' } },
      },
      {
        name: 'AWS_SESSION_TOKEN',
        valueFrom: { secretKeyRef: { name: 's3-reader', key: 'AWS_SESSION_TOKEN', optional: true } },
      },
    ]);
    expect(pod?.serviceAccountName).toBe('model-reader');
    expect(pod?.automountServiceAccountToken).toBe(false);
    expect(pod?.volumes?.map((v) => v.name)).toEqual(['cache', 'fetch-tmp']);
  });

  it('without a Secret: the SDK default chain, no credential variables; shares the cache key of the same digests', () => {
    const spec = storeSpec({ url: 's3://models/llama-3.1-8b' });
    const c = jobOf(spec).spec?.template.spec?.containers[0];
    expect(c?.env?.map((e) => e.name)).toEqual(['POD_IP']);
    expect(c?.args).not.toContain('--store-path-style');
    // The cache is of the files, not of where they came from.
    expect(computeModelCacheKey(spec)).toBe(KEY);
  });

  it('plans a fetch Job into the cache, as for a hub download, described by its URL', () => {
    const spec = storeSpec({ url: 's3://models/llama-3.1-8b' });
    const plan = planModelDelivery(observe({ cache: pvc(), spec }));
    expect(plan.actions.map((a) => a.kind)).toEqual(['createJob']);
    expect(plan.condition.message).toContain('s3://models/llama-3.1-8b');
  });
});

describe('ModelReason', () => {
  it('each reason is documented in docs/operations.md', () => {
    const doc = readFileSync(new URL('../../../../../docs/operations.md', import.meta.url), 'utf8');
    for (const reason of Object.values(ModelReason)) expect(doc).toContain(`\`${reason}\``);
  });
});
