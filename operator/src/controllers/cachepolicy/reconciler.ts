import { validateResource, type CachePolicyResource, type DeploymentResource } from '../../api/index.ts';
import { buildBootstrapFields, computeBootstrapRoom, toRandom32 } from '../../sglang/bootstrap.ts';
import type { ClientOptions } from '../../sglang/client.ts';
import { postGenerate, type GenerateRequest } from '../../sglang/generate.ts';
import type { KubeClient } from '../../runtime/client.ts';
import { isNotFound } from '../../runtime/client.ts';
import type { ControllerDefinition, Manager } from '../../runtime/manager.ts';
import type { KubeObject, ObjectKey } from '../../runtime/objects.ts';
import { TerminalError, type ReconcileContext, type ReconcileResult } from '../../runtime/reconcile.ts';
import { Resources } from '../../runtime/resources.ts';
import { writeStatusIfChanged } from '../../runtime/status.ts';
import { buildRuntimeKeyLookup } from '../../sglang/runtime-key.ts';
import { computePolicyStatus } from './targets.ts';
import { planWarmup, pruneWarmed, type WarmupTarget } from './warmup.ts';

type PolicyObject = KubeObject & CachePolicyResource;
type DeploymentObject = KubeObject & DeploymentResource;
type ConfigMapObject = KubeObject & { data?: Record<string, string> };
type SecretObject = KubeObject & { data?: Record<string, string> };

export interface CachePolicyControllerOptions {
  manager: Manager;
  client: KubeClient;
  warmupTimeoutMs?: number;
}

function parseAll<T>(objs: readonly KubeObject[], kind: string): T[] {
  return objs.flatMap((o) => {
    const r = validateResource(o);
    return r.ok && r.value.kind === kind ? [r.value as T] : [];
  });
}

/**
 * One warm-up request: to a standalone endpoint as is; to a prefill endpoint
 * as SGLang's PD clients send it, to the prefill and its decode partner at
 * once with the prefill's bootstrap address and a fresh room. Returns the
 * error, if any.
 */
async function sendWarmup(
  t: WarmupTarget,
  body: GenerateRequest,
  post: ClientOptions,
): Promise<string | undefined> {
  if (!t.pair) {
    const r = await postGenerate(t.url, body, post);
    return r.ok ? undefined : r.error;
  }
  const room = computeBootstrapRoom(toRandom32(Math.random));
  const paired = { ...body, ...buildBootstrapFields(t.pair.bootstrapHost, t.pair.bootstrapPort, room) };
  const [prefill, decode] = await Promise.all([
    postGenerate(t.url, paired, post),
    postGenerate(t.pair.decodeUrl, paired, post),
  ]);
  if (!prefill.ok) return prefill.error;
  return decode.ok ? undefined : `decode ${t.pair.decodePod}: ${decode.error}`;
}

export function buildCachePolicyController(opts: CachePolicyControllerOptions): ControllerDefinition {
  const { manager, client } = opts;
  const policies = manager.informer<PolicyObject>(Resources.cachePolicies);
  const deployments = manager.informer<DeploymentObject>(Resources.sglangDeployments);
  // The runtimes' API keys, from the Deployments' key Secrets (the only Secrets cached).
  const runtimeKey = buildRuntimeKeyLookup(manager.informer<SecretObject>(Resources.secrets));

  async function readDocuments(
    policy: CachePolicyResource,
  ): Promise<{ ok: true; docs: string[] } | { ok: false; message: string }> {
    const docs: string[] = [];
    for (const ref of policy.spec.warmup?.documents ?? []) {
      let cm: ConfigMapObject | undefined;
      try {
        cm = await client.get<ConfigMapObject>(Resources.configMaps, policy.metadata.namespace, ref.name);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      const text = cm?.data?.[ref.key];
      if (text === undefined)
        return {
          ok: false,
          message: `warm-up document ${ref.name}/${ref.key} not found: create the ConfigMap key`,
        };
      docs.push(text);
    }
    return { ok: true, docs };
  }

  /** Prefills every document on each target; returns the pods where all of them succeeded. */
  async function warm(
    namespace: string,
    targets: readonly WarmupTarget[],
    docs: readonly string[],
    ctx: ReconcileContext,
  ): Promise<WarmupTarget[]> {
    const done = await Promise.all(
      targets.map(async (t) => {
        for (const text of docs) {
          // One generated token: the point is the prefill, which lands the prefix in the radix cache.
          const body = { text, cache_salt: t.salt, sampling_params: { max_new_tokens: 1, temperature: 0 } };
          const post = {
            timeoutMs: opts.warmupTimeoutMs ?? 120_000,
            signal: ctx.signal,
            apiKey: runtimeKey(namespace, t.deployment, t.fingerprint),
          };
          const error = await sendWarmup(t, body, post);
          if (error !== undefined) {
            ctx.logger.warn('warm-up failed', { pod: t.pod, error });
            return undefined;
          }
        }
        return t;
      }),
    );
    return done.filter((t) => t !== undefined);
  }

  async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const obj = policies.get(key.namespace, key.name);
    if (!obj || obj.metadata?.deletionTimestamp) return;
    const parsed = validateResource(obj);
    if (!parsed.ok || parsed.value.kind !== 'CachePolicy') {
      const message = parsed.ok
        ? 'not a CachePolicy'
        : parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
      manager.events.event(obj, 'Warning', 'InvalidSpec', message);
      throw new TerminalError(message);
    }
    const policy = parsed.value;
    const ns = key.namespace;
    const all = parseAll<CachePolicyResource>(policies.list({ namespace: ns }), 'CachePolicy');
    const byName = new Map(
      parseAll<DeploymentResource>(deployments.list({ namespace: ns }), 'Deployment').map((d) => [
        d.metadata.name ?? '',
        d,
      ]),
    );
    const warmed = new Map(
      (policy.status?.targets ?? []).map((t) => [
        t.name,
        pruneWarmed(t.warmedEndpoints ?? [], byName.get(t.name)),
      ]),
    );
    let status = computePolicyStatus({ policy, policies: all, deployments: byName, warmed }, ctx.now());

    let retry = false;
    const salts = new Map(
      (status.targets ?? []).filter((t) => t.accepted && t.cacheSalt).map((t) => [t.name, t.cacheSalt ?? '']),
    );
    const todo = planWarmup({ ...policy, status }, byName, salts);
    if (todo.length > 0) {
      const docs = await readDocuments(policy);
      if (!docs.ok) {
        manager.events.event(obj, 'Warning', 'WarmupDocumentMissing', docs.message);
        retry = true;
      } else {
        const ok = await warm(ns, todo, docs.docs, ctx);
        retry = ok.length < todo.length;
        for (const t of ok) warmed.set(t.deployment, [...(warmed.get(t.deployment) ?? []), t.pod]);
        status = computePolicyStatus({ policy, policies: all, deployments: byName, warmed }, ctx.now());
        for (const t of ok)
          manager.events.event(
            obj,
            'Normal',
            'WarmedUp',
            `prefilled ${docs.docs.length} document(s) on ${t.deployment}/${t.pod}`,
          );
      }
    }
    const before = policy.status?.conditions?.find((c) => c.type === 'Accepted');
    const { written } = await writeStatusIfChanged(client, Resources.cachePolicies, obj, status);
    const after = status.conditions?.find((c) => c.type === 'Accepted');
    if (written && after && (before?.status !== after.status || before.reason !== after.reason)) {
      manager.events.event(obj, after.status === 'True' ? 'Normal' : 'Warning', after.reason, after.message);
    }
    return retry ? { requeueAfterMs: 10_000 } : undefined;
  }

  return {
    name: 'cachepolicy',
    primary: Resources.cachePolicies,
    watches: [
      {
        // A Deployment appearing, changing identity or gaining endpoints concerns every policy that names it.
        resource: Resources.sglangDeployments,
        map: (d) =>
          policies
            .list({ namespace: d.metadata?.namespace ?? '' })
            .filter((p) => p.spec.targetRefs.some((r) => r.name === d.metadata?.name))
            .map((p) => ({ namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '' })),
      },
      {
        // The oldest policy wins a contested target: a policy coming or going concerns its neighbours.
        resource: Resources.cachePolicies,
        map: (changed) =>
          policies
            .list({ namespace: changed.metadata?.namespace ?? '' })
            .filter((p) => p.metadata?.name !== changed.metadata?.name)
            .map((p) => ({ namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '' })),
      },
    ],
    reconciler: { reconcile },
  };
}
