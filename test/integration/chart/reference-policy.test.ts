// The chart's reference policies (templates/reference-policy.yaml, ADR 0023) on the
// real API server: a user who may create cacheroute objects but not read a Secret
// (or use a claim or ServiceAccount) cannot have the operator read or mount it for
// them; the refusal names the object and what to grant; the same user with that
// grant is allowed. Users are client certificates with only the rights a Role here
// gives them. The policies are rendered for this test's namespace alone
// (operator.watchNamespaces), so they bind nowhere else on the shared control plane.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { createUserKubeconfig } from '../../support/controlplane.ts';
import { helmTemplate } from '../../support/helm.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';
import { loadSample, REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const controlPlane = inject('controlPlane');

type Json = Record<string, unknown>;
interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

let ns = '';

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
});

/** A namespace of the test's own, with the chart's policies bound to it alone. */
async function createPolicedNamespace(): Promise<void> {
  ns = await createTestNamespace(kubeconfig, 'refs');
  const release = `r${randomBytes(2).toString('hex')}`;
  const policies = (
    await helmTemplate({ release, namespace: ns, values: { 'operator.watchNamespaces[0]': ns } })
  ).filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'));
  expect(policies).toHaveLength(10);
  const list = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: policies });
  await kubectlOk(['apply', '-f', '-'], { kubeconfig, input: list });
  onTestFinished(async () => {
    await kubectl(['delete', '--ignore-not-found', '-f', '-'], { kubeconfig, input: list });
  });
}

/** A user whose only rights are these rules in the test namespace. */
async function createUser(name: string, rules: Rule[]): Promise<string> {
  const user = `${name}-${randomBytes(3).toString('hex')}`;
  await grant(user, rules);
  return createUserKubeconfig(controlPlane, { user });
}

async function grant(user: string, rules: Rule[]): Promise<void> {
  const roleName = `${user}-${randomBytes(3).toString('hex')}`;
  const role = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: roleName },
    rules,
  };
  const binding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: roleName },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: roleName },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
  };
  const items = [role, binding];
  await kubectlOk(['apply', '-n', ns, '-f', '-'], {
    kubeconfig,
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items }),
  });
}

const userOf = (userKubeconfig: string): string =>
  /user-([A-Za-z0-9._-]+)\.kubeconfig$/.exec(userKubeconfig)?.[1] ?? '';

const CACHEROUTE_WRITER: Rule = {
  apiGroups: ['cacheroute.dev'],
  resources: ['deployments', 'tasks', 'tenants', 'cachepolicies', 'qualifications'],
  verbs: ['create', 'get', 'patch'],
};
const mayGet = (resource: string, name: string): Rule => ({
  apiGroups: [''],
  resources: [resource],
  verbs: ['get'],
  resourceNames: [name],
});
const mayUse = (resource: string, name: string): Rule => ({ ...mayGet(resource, name), verbs: ['use'] });

/** Creates (server dry run unless `persist`) as the user: the API server's answer. */
async function createAs(userKubeconfig: string, doc: Json, persist = false) {
  const res = await kubectl(['create', '-n', ns, ...(persist ? [] : ['--dry-run=server']), '-f', '-'], {
    kubeconfig: userKubeconfig,
    input: JSON.stringify(doc),
  });
  return { allowed: res.code === 0, message: res.stderr.trim() };
}

/** The policy and RBAC take effect through informers: wait until the answer is the expected one. */
async function expectRefused(userKubeconfig: string, doc: Json, ...mentions: string[]): Promise<void> {
  await eventually(async () => {
    const res = await createAs(userKubeconfig, doc);
    expect(res.allowed).toBe(false);
    for (const m of mentions) expect(res.message).toContain(m);
  });
}

async function expectAllowed(userKubeconfig: string, doc: Json): Promise<void> {
  await eventually(async () =>
    expect(await createAs(userKubeconfig, doc)).toEqual({ allowed: true, message: '' }),
  );
}

function deploymentWith(name: string, source: Json): Json {
  const doc = loadSample('deployment-hicache.yaml') as unknown as Json & { spec: { model: Json } };
  // An object store's digests are its pin: no hub revision beside them.
  const { revision, ...model } = doc.spec.model;
  const pinned = 'objectStore' in source ? model : { ...model, revision };
  return { ...doc, metadata: { name }, spec: { ...doc.spec, model: { ...pinned, source } } };
}

const HUB = { endpoint: 'https://hf.example', tokenSecretRef: { name: 'hub-token', key: 'token' } };

describe('a reference is honoured only when the applying user could use what it names', () => {
  it('download.tokenSecretRef: refused without get on the Secret, with a message that says what to grant; allowed with it', async () => {
    await createPolicedNamespace();
    const alice = await createUser('alice', [CACHEROUTE_WRITER]);
    const doc = deploymentWith('hub', { download: HUB });
    await expectRefused(
      alice,
      doc,
      'spec.model.source.download.tokenSecretRef names Secret hub-token',
      `you (${userOf(alice)}) may not read yourself`,
      'get on secrets/hub-token',
    );
    // Get on another Secret is not enough.
    await grant(userOf(alice), [mayGet('secrets', 'other')]);
    await expectRefused(alice, doc, 'Secret hub-token');
    await grant(userOf(alice), [mayGet('secrets', 'hub-token')]);
    await expectAllowed(alice, doc);
  });

  it('objectStore: the credentials Secret needs get, the fetch ServiceAccount create on pods or use on it', async () => {
    await createPolicedNamespace();
    const carol = await createUser('carol', [CACHEROUTE_WRITER]);
    const doc = deploymentWith('store', {
      objectStore: {
        url: 's3://models/llama-3.1-8b',
        endpoint: 'https://store.example',
        credentialsSecretRef: { name: 'store-creds' },
        serviceAccountName: 'fetcher',
      },
    });
    await expectRefused(carol, doc, 'Secret store-creds', 'get on secrets/store-creds');
    await grant(userOf(carol), [mayGet('secrets', 'store-creds')]);
    await expectRefused(
      carol,
      doc,
      'spec.model.source.objectStore.serviceAccountName names ServiceAccount fetcher',
      'create on pods there, or the verb use on serviceaccounts/fetcher',
    );
    // get on a ServiceAccount (the view role has it) is no right to run as it.
    await grant(userOf(carol), [mayGet('serviceaccounts', 'fetcher')]);
    await expectRefused(carol, doc, 'ServiceAccount fetcher');
    await grant(userOf(carol), [mayUse('serviceaccounts', 'fetcher')]);
    await expectAllowed(carol, doc);
  });

  it('pvc.claimName: refused without create on pods or use on the claim; either one allows it', async () => {
    await createPolicedNamespace();
    const doc = deploymentWith('pvc', { pvc: { claimName: 'models' } });
    const dave = await createUser('dave', [CACHEROUTE_WRITER]);
    await expectRefused(dave, doc, 'PersistentVolumeClaim models', 'use on persistentvolumeclaims/models');
    await grant(userOf(dave), [mayUse('persistentvolumeclaims', 'models')]);
    await expectAllowed(dave, doc);
    // Whoever may create pods may mount any claim of the namespace anyway.
    const erin = await createUser('erin', [
      CACHEROUTE_WRITER,
      { apiGroups: [''], resources: ['pods'], verbs: ['create'] },
    ]);
    await expectAllowed(erin, doc);
  });

  it('hicache.storage.volume.claimName (the L3 volume): refused without create on pods or use on the claim', async () => {
    await createPolicedNamespace();
    const base = deploymentWith('l3', {
      hostPath: { path: '/var/lib/cacheroute/models/x', verify: false },
    }) as Json & {
      spec: Json;
    };
    const doc = {
      ...base,
      spec: {
        ...base.spec,
        hicache: { ratio: 2, storage: { backend: 'file', volume: { claimName: 'team-kv' } } },
      },
    };
    const gina = await createUser('gina', [CACHEROUTE_WRITER]);
    await expectRefused(
      gina,
      doc,
      'spec.hicache.storage.volume.claimName names PersistentVolumeClaim team-kv',
      'use on persistentvolumeclaims/team-kv',
    );
    await grant(userOf(gina), [mayUse('persistentvolumeclaims', 'team-kv')]);
    await expectAllowed(gina, doc);
  });

  it("a Task's OpenRouter key and input ConfigMap, a Tenant's key Secret, a CachePolicy's warm-up documents, a Qualification's trace", async () => {
    await createPolicedNamespace();
    const frank = await createUser('frank', [CACHEROUTE_WRITER]);
    const task = { ...loadSample('task-openrouter.yaml'), metadata: { name: 'or' } };
    await expectRefused(frank, task, 'spec.target.openrouter.apiKeySecretRef names Secret openrouter');
    const sglangTask = loadSample('task-sglang.yaml') as unknown as Json & { spec: Json };
    const fromMap = {
      ...sglangTask,
      metadata: { name: 'from-map' },
      spec: { ...sglangTask.spec, input: { configMapRef: { name: 'prompts', key: 'p' } } },
    };
    await expectRefused(
      frank,
      fromMap,
      'spec.input.configMapRef names ConfigMap prompts',
      'get on configmaps/prompts',
    );
    const tenant = { ...loadSample('tenant.yaml'), metadata: { name: 't' } };
    await expectRefused(frank, tenant, 'spec.apiKeys.secretRef names Secret team-a-keys');
    const policy = { ...loadSample('cachepolicy.yaml'), metadata: { name: 'p' } };
    await expectRefused(frank, policy, 'spec.warmup.documents names ConfigMap shared-knowledge');
    const qualification = loadSample('qualification.yaml') as unknown as Json & { spec: Json };
    const fromTrace = {
      ...qualification,
      metadata: { name: 'from-trace' },
      spec: { ...qualification.spec, workload: { trace: { configMapRef: { name: 'trace', key: 't' } } } },
    };
    await expectRefused(frank, fromTrace, 'spec.workload.trace.configMapRef names ConfigMap trace');

    await grant(userOf(frank), [
      mayGet('secrets', 'openrouter'),
      mayGet('configmaps', 'prompts'),
      mayGet('secrets', 'team-a-keys'),
      mayGet('configmaps', 'shared-knowledge'),
      mayGet('configmaps', 'trace'),
    ]);
    for (const doc of [task, fromMap, tenant, policy, fromTrace]) await expectAllowed(frank, doc);
  });

  it('an update that leaves a reference as it was is not checked again; one that changes it is', async () => {
    await createPolicedNamespace();
    const doc = deploymentWith('kept', { download: HUB });
    await kubectlOk(['create', '-n', ns, '-f', '-'], { kubeconfig, input: JSON.stringify(doc) });
    onTestFinished(async () => {
      await kubectl(['delete', '-n', ns, 'deployments.cacheroute.dev', 'kept', '--wait=false'], {
        kubeconfig,
      });
    });
    const gina = await createUser('gina', [CACHEROUTE_WRITER]);
    // Wait for gina's rights and the policy: a changed reference is refused. Each try names
    // another Secret: a try that landed before the policy took effect would make the next
    // one an unchanged reference, which is allowed.
    const patch = (spec: Json) =>
      kubectl(
        ['patch', '-n', ns, 'deployments.cacheroute.dev', 'kept', '--type=merge', '-p', JSON.stringify(spec)],
        {
          kubeconfig: gina,
        },
      );
    let tries = 0;
    await eventually(async () => {
      const name = `x${++tries}`;
      const res = await patch({
        spec: { model: { source: { download: { tokenSecretRef: { name, key: 't' } } } } },
      });
      expect(res.code).not.toBe(0);
      expect(res.stderr).toContain(`names Secret ${name}`);
    });
    const relabel = await patch({ metadata: { labels: { team: 'a' } } });
    expect(relabel.stderr).toBe('');
    expect(relabel.code).toBe(0);
  });
});
