// Events on events.k8s.io/v1: recorded with type, reason, note and the object they are
// about; repeats aggregate into a series on one Event instead of new objects.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubeClient } from '#kube/client.ts';
import { createEventRecorder } from '../../../operator/src/manager/events.ts';
import type { KubeObject } from '#kube/objects.ts';
import { createRequestCounter } from '../../../operator/src/manager/request-counter.ts';
import { Resources } from '#kube/resources.ts';
import { createTestNamespace, kubectlOk } from '../../support/kubectl.ts';

const kubeconfig = inject('kubeconfig');
const counter = createRequestCounter();
let client: KubeClient;
beforeAll(async () => {
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  client = await KubeClient.fromKubeConfig(kc, { observers: [counter.observe] });
});
afterAll(async () => client.close());

interface EventObject extends KubeObject {
  type: string;
  reason: string;
  note: string;
  reportingController: string;
  reportingInstance: string;
  regarding: { kind: string; name: string; uid: string };
  series?: { count: number };
}

describe('runtime events', () => {
  it('records Normal and Warning events and aggregates repeats into a series', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-events');
    const obj = await client.create<KubeObject>(Resources.configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'subject', namespace: ns },
    });
    counter.reset();
    const recorder = createEventRecorder({ client, reportingInstance: 'test-instance' });
    recorder.event(obj, 'Normal', 'Created', 'created workload subject');
    for (let i = 0; i < 4; i++)
      recorder.event(obj, 'Warning', 'IdentityMismatch', 'pod p-0 reports model other');
    recorder.event(obj, 'Warning', 'IdentityMismatch', 'pod p-1 reports model other');
    await recorder.flush();

    const list = JSON.parse(
      await kubectlOk(['get', 'events.events.k8s.io', '-n', ns, '-o', 'json'], { kubeconfig }),
    ) as { items: EventObject[] };
    const summary = list.items.map((e) => `${e.type} ${e.reason} ${e.note} x${e.series?.count ?? 1}`).sort();
    expect(summary).toEqual([
      'Normal Created created workload subject x1',
      'Warning IdentityMismatch pod p-0 reports model other x4',
      'Warning IdentityMismatch pod p-1 reports model other x1',
    ]);
    for (const e of list.items) {
      expect(e.regarding).toMatchObject({ kind: 'ConfigMap', name: 'subject', uid: obj.metadata?.uid });
      expect(e.reportingInstance).toBe('test-instance');
    }
    // Three Events created, the series written once: six calls, four writes.
    expect(counter.snapshot().byVerbResource).toEqual({
      'create events.events.k8s.io': 3,
      'patch events.events.k8s.io': 1,
    });
    // kubectl describe shows them (events.k8s.io and core/v1 are one store).
    const described = await kubectlOk(['describe', 'configmap', 'subject', '-n', ns], { kubeconfig });
    expect(described).toMatch(/Warning\s+IdentityMismatch/);
  });
});
