// A served name belongs to its namespace (issue 30 item 6), as the operator reports it,
// against the real API server: the younger of two Deployments in different namespaces
// that serve one name gets ServedNameShared (and a Warning Event) naming where it was
// served first; the older gets nothing; the condition goes when the older one does.
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { join } from 'node:path';
import { startTestOperator } from '../../support/operator/start.ts';
import { buildDeploymentManifest } from '../../support/builders.ts';
import { createTestNamespace, eventually, kubectlOk } from '../../support/kubectl.ts';
import { REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
});

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

async function conditionsOf(ns: string): Promise<Condition[]> {
  const out = await kubectlOk(
    ['get', 'deployments.cacheroute.dev', 'llama-8b', '-n', ns, '-o', 'jsonpath={.status.conditions}'],
    { kubeconfig },
  );
  return out === '' ? [] : (JSON.parse(out) as Condition[]);
}

const shared = async (ns: string): Promise<Condition | undefined> =>
  (await conditionsOf(ns)).find((c) => c.type === 'ServedNameShared');

async function createDeployment(ns: string): Promise<string> {
  await kubectlOk(['apply', '-n', ns, '-f', '-'], {
    kubeconfig,
    input: JSON.stringify(buildDeploymentManifest({ name: 'llama-8b', replicas: 1 })),
  });
  return kubectlOk(
    [
      'get',
      'deployments.cacheroute.dev',
      'llama-8b',
      '-n',
      ns,
      '-o',
      'jsonpath={.metadata.creationTimestamp}',
    ],
    { kubeconfig },
  );
}

describe('ServedNameShared', () => {
  it('on the younger of two namespaces serving one name, with an Event; gone with the older one', async () => {
    const older = await createTestNamespace(kubeconfig, 'name-a');
    const newer = await createTestNamespace(kubeconfig, 'name-b');
    await startTestOperator(kubeconfig, [older, newer]);

    const createdOlder = await createDeployment(older);
    // creationTimestamp has a resolution of one second: make the second one visibly newer.
    await eventually(() => expect(new Date().toISOString().slice(0, 19)).not.toBe(createdOlder.slice(0, 19)));
    await createDeployment(newer);

    const condition = await eventually(async () => {
      const c = await shared(newer);
      expect(c).toBeDefined();
      return c;
    });
    expect(condition).toMatchObject({ status: 'True', reason: 'ServedFirstElsewhere' });
    expect(condition?.message).toContain(`namespace ${older} (Deployment ${older}/llama-8b)`);
    await eventually(async () => expect((await conditionsOf(older)).length).toBeGreaterThan(0));
    expect(await shared(older)).toBeUndefined();
    await eventually(async () => {
      const events = await kubectlOk(
        ['get', 'events', '-n', newer, '--field-selector', 'reason=ServedFirstElsewhere', '-o', 'name'],
        { kubeconfig },
      );
      expect(events.trim()).not.toBe('');
    });

    // The older one goes: the name is this namespace's alone, and the condition goes too.
    await kubectlOk(['delete', 'deployments.cacheroute.dev', 'llama-8b', '-n', older], { kubeconfig });
    await eventually(async () => expect(await shared(newer)).toBeUndefined());
  });
});
