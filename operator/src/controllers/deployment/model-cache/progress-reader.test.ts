// The progress reader against the fetcher's own progress server on a port: which pods it reads,
// when it queues a Deployment, and what it keeps when a pod goes.
import { afterEach, describe, expect, it } from 'vitest';
import type { FetchProgress } from '#api/model-fetch-progress.ts';
import { serveFetchProgress, type ProgressServer } from '../../../../../fetcher/src/progress-server.ts';
import { noopLogger } from '#kube/logger.ts';
import type { FetchPodObject } from './plan.ts';
import { FetchProgressReader, findProgressTargets, summarizeProgress } from './progress-reader.ts';

const servers: ProgressServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const fetchPod = (
  name: string,
  over: { phase?: string; ip?: string; port?: number; job?: string; created?: string } = {},
): FetchPodObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name,
    namespace: 'ns',
    labels: { 'job-name': over.job ?? 'model-fetch-k' },
    creationTimestamp: over.created ?? '2026-12-03T06:00:00Z',
  },
  spec: {
    containers: [
      {
        name: 'fetch',
        ports: over.port === undefined ? [] : [{ name: 'progress', containerPort: over.port }],
      },
    ],
  },
  status: { phase: over.phase ?? 'Running', ...(over.ip === undefined ? {} : { podIP: over.ip }) },
});

const at = (bytesDone: number, phase: FetchProgress['phase'] = 'weights'): FetchProgress => ({
  phase,
  filesDone: 1,
  filesTotal: 3,
  bytesDone,
  bytesTotal: 1000,
});

describe('findProgressTargets', () => {
  it('reads the newest running pod of each Job that serves progress, bracketing an IPv6 address', () => {
    const targets = findProgressTargets([
      fetchPod('old', { ip: '10.0.0.1', port: 8497, created: '2026-12-03T06:00:00Z' }),
      fetchPod('new', { ip: '10.0.0.2', port: 8497, created: '2026-12-03T06:01:00Z' }),
      fetchPod('done', { ip: '10.0.0.3', port: 8497, phase: 'Succeeded', job: 'other' }),
      fetchPod('no-ip', { port: 8497, job: 'other' }),
      // A Job made by an operator before progress: no port, nothing to read.
      fetchPod('no-port', { ip: '10.0.0.4', job: 'older' }),
      fetchPod('v6', { ip: 'fd00::7', port: 8497, job: 'six' }),
    ]);
    expect(targets.map((t) => [t.job, t.url])).toEqual([
      ['ns/model-fetch-k', 'http://10.0.0.2:8497/progress'],
      ['ns/six', 'http://[fd00::7]:8497/progress'],
    ]);
  });
});

describe('findProgressTargets, SGLang pods', () => {
  it("reads an SGLang pod's init container while it runs, keyed by the pod", () => {
    const sglang = (name: string, running: boolean): FetchPodObject => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'ns', labels: {} },
      spec: {
        initContainers: [{ name: 'fetch', ports: [{ name: 'progress', containerPort: 8497 }] }],
        containers: [{ name: 'sglang' }],
      },
      status: {
        phase: 'Running',
        podIP: '10.0.0.9',
        initContainerStatuses: [
          {
            name: 'fetch',
            image: 'x',
            imageID: '',
            ready: !running,
            restartCount: 0,
            state: running ? { running: {} } : { terminated: { exitCode: 0 } },
          },
        ],
      },
    });
    expect(findProgressTargets([sglang('a', true), sglang('b', false)]).map((t) => [t.job, t.url])).toEqual([
      ['ns/pod:a', 'http://10.0.0.9:8497/progress'],
    ]);
  });
});

describe('summarizeProgress', () => {
  it('moves with a phase, a file or a whole percent, not with every byte', () => {
    expect(summarizeProgress(at(100))).toBe(summarizeProgress(at(109)));
    expect(summarizeProgress(at(100))).not.toBe(summarizeProgress(at(110)));
    expect(summarizeProgress(at(100))).not.toBe(summarizeProgress(at(100, 'verifying')));
    expect(summarizeProgress(at(100))).not.toBe(summarizeProgress({ ...at(100), filesDone: 2 }));
  });
});

describe('FetchProgressReader', () => {
  it('reads a running fetch, queues its users when it moved on, and forgets it when the pod stops', async () => {
    let current: FetchProgress | undefined;
    const server = await serveFetchProgress({ host: '127.0.0.1', port: 0, current: () => current });
    servers.push(server);
    let pods = [fetchPod('p', { ip: '127.0.0.1', port: server.port })];
    const changed: string[] = [];
    const reader = new FetchProgressReader({
      pods: () => pods,
      isLeader: () => true,
      onChanged: (pod) => void changed.push(pod.metadata?.name ?? ''),
      periodMs: 60_000,
      logger: noopLogger,
      signal: new AbortController().signal,
    });
    // Nothing reported yet (204): nothing shown, nobody queued.
    await reader.pass();
    expect(reader.progressOf('ns', 'model-fetch-k')).toBeUndefined();
    expect(changed).toEqual([]);

    current = at(100);
    await reader.pass();
    expect(reader.progressOf('ns', 'model-fetch-k')).toEqual(at(100));
    expect(changed).toEqual(['p']);
    // Within the same percent: the reading is kept, but no reconcile is queued for it.
    current = at(105);
    await reader.pass();
    expect(reader.progressOf('ns', 'model-fetch-k')?.bytesDone).toBe(105);
    expect(changed).toEqual(['p']);
    current = at(500);
    await reader.pass();
    expect(changed).toEqual(['p', 'p']);

    // Unreachable for a pass: the last reading stays while the pod runs.
    await server.close();
    await reader.pass();
    expect(reader.progressOf('ns', 'model-fetch-k')?.bytesDone).toBe(500);
    // The pod ended: its result is in its termination message, its progress is gone.
    pods = [fetchPod('p', { ip: '127.0.0.1', port: server.port, phase: 'Succeeded' })];
    await reader.pass();
    expect(reader.progressOf('ns', 'model-fetch-k')).toBeUndefined();
  });

  it('reads nothing while another operator leads', async () => {
    const server = await serveFetchProgress({ host: '127.0.0.1', port: 0, current: () => at(1) });
    servers.push(server);
    const reader = new FetchProgressReader({
      pods: () => [fetchPod('p', { ip: '127.0.0.1', port: server.port })],
      isLeader: () => false,
      onChanged: () => undefined,
      periodMs: 60_000,
      logger: noopLogger,
      signal: new AbortController().signal,
    });
    await reader.pass();
    expect(reader.progressOf('ns', 'model-fetch-k')).toBeUndefined();
  });
});
