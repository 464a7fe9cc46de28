// make test-monitoring's live half: the local system (`make run`'s), a real
// Prometheus scraping it as the chart's scrape objects do, and traffic through
// the gateway that exercises what the dashboards show: conversations over every
// served model, results reused, a model with SGLang's KV events turned on (the
// gateway's index panels), a priced Task (the cost ledger), and a moment of
// admission tightened until the gateway refuses. Then every panel is asked of
// Prometheus (evaluate-panels.ts).

import { join } from 'node:path';
import { eventually, kubectlOk } from '../../test/support/kubectl.ts';
import { LOCAL_PORTS, ROOT, startLocalSystem, type LocalSystem } from '../local-system.ts';
import type { PanelQueries } from './dashboards.ts';
import { countSeries, evaluatePanels, type PanelEvaluation } from './evaluate-panels.ts';
import { startLocalPrometheus } from './local-prometheus.ts';
import { chat, replayConversations } from './replay-traffic.ts';

const GATEWAY = `http://127.0.0.1:${LOCAL_PORTS.gateway}`;
/** The sample Deployment given KV events for the replay (its pods roll). */
const EVENTS_MODEL = 'qwen-32b';

export interface LiveReplayResult extends PanelEvaluation {
  readonly requests: number;
  readonly refused: number;
}

async function listServedModels(apiKey: string): Promise<string[]> {
  const res = await fetch(`${GATEWAY}/v1/models`, { headers: { authorization: `Bearer ${apiKey}` } });
  const body = (await res.json()) as { data?: { id: string }[] };
  return (body.data ?? []).map((m) => m.id).sort();
}

/**
 * KV events on, under a new deploymentId (a changed spec is a new identity: the operator applies
 * nothing until the id changes too): the Deployment rolls, and the gateway follows the new pods'
 * publishers.
 */
async function enableKvEvents(kubeconfig: string): Promise<void> {
  const id = await kubectlOk(['get', 'sgd', EVENTS_MODEL, '-o', 'jsonpath={.spec.deploymentId}'], {
    kubeconfig,
  });
  const patch = { spec: { deploymentId: `${id}-events`, events: { kvCache: true } } };
  await kubectlOk(['patch', 'sgd', EVENTS_MODEL, '--type=merge', '-p', JSON.stringify(patch)], {
    kubeconfig,
  });
  await eventually(
    async () => {
      const out = await kubectlOk(['get', 'sgd', EVENTS_MODEL, '-o', 'json'], { kubeconfig });
      const d = JSON.parse(out) as {
        status?: { endpoints?: { ready?: boolean; verified?: boolean; events?: unknown }[] };
      };
      const eps = d.status?.endpoints ?? [];
      if (eps.length === 0 || !eps.every((e) => e.ready && e.verified && e.events))
        throw new Error(`${EVENTS_MODEL}: endpoints not all serving with events yet`);
    },
    { timeoutMs: 180_000, intervalMs: 1000 },
  );
}

/** A Task with a price table: its status records a cost. */
async function runPricedTask(kubeconfig: string): Promise<void> {
  const task = {
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Task',
    metadata: { name: 'monitoring-priced' },
    spec: {
      target: { deployment: { name: 'llama-8b' } },
      input: { messages: [{ role: 'user', content: 'Name three Kubernetes objects.' }] },
      sampling: { temperature: 0 },
      maxOutputTokens: 32,
      budget: {
        maxInputTokens: 1024,
        maxOutputTokens: 32,
        prices: { inputPerMillion: '0.5', outputPerMillion: '1.5' },
        currency: 'USD',
      },
    },
  };
  await kubectlOk(['apply', '-f', '-'], { kubeconfig, input: JSON.stringify(task) });
  await eventually(
    async () => {
      const cost = await kubectlOk(['get', 'task', 'monitoring-priced', '-o', 'jsonpath={.status.cost}'], {
        kubeconfig,
      });
      if (cost === '') throw new Error('the priced Task has no cost yet');
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}

/** Admission tightened to one at a time and a queue of one, a burst sent, the sample restored. */
async function burstPastAdmission(kubeconfig: string, apiKey: string): Promise<number> {
  const tight = { spec: { admission: { maxConcurrency: 1, maxQueue: 1, queueTimeoutSeconds: 1 } } };
  await kubectlOk(['patch', 'cachepolicy', 'team-a', '--type=merge', '-p', JSON.stringify(tight)], {
    kubeconfig,
  });
  let refused = 0;
  try {
    await eventually(
      async () => {
        const codes = await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            chat(
              { gateway: GATEWAY, apiKey },
              {
                model: 'llama-8b',
                messages: [{ role: 'user', content: `burst ${i}: write a long story.` }],
                max_tokens: 256,
              },
              { anyStatus: true },
            ),
          ),
        );
        const n = codes.filter((c) => c === 429 || c === 503).length;
        refused += n;
        // The gateway sees the tightened policy through its watch: until then all pass.
        if (n === 0) throw new Error(`no request refused yet (${codes.join(',')})`);
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
  } finally {
    await kubectlOk(['apply', '-f', join(ROOT, 'examples', 'cachepolicy.yaml')], { kubeconfig });
  }
  return refused;
}

export async function runLiveReplay(opts: {
  readonly dir: string;
  readonly panels: readonly PanelQueries[];
  readonly log: (msg: string) => void;
  /** Called with Prometheus still up, after the evaluation: the replay ran from `since` (unix s). */
  readonly afterEvaluation?: (prometheus: string, since: number) => Promise<void>;
  /** Pause between turns (pictures want a replay spread over a minute or two). */
  readonly turnPauseMs?: number;
}): Promise<LiveReplayResult> {
  const { dir, log } = opts;
  let system: LocalSystem | undefined;
  let prometheus: Awaited<ReturnType<typeof startLocalPrometheus>> | undefined;
  try {
    system = await startLocalSystem({ dir, gpuNodes: 9, real: false, log });
    const kubeconfig = system.cp.kubeconfig;
    prometheus = await startLocalPrometheus({ dir, kubeconfig, log, scrapeInterval: '2s' });
    log(`turning on KV events for ${EVENTS_MODEL}`);
    await enableKvEvents(kubeconfig);
    log('running a priced Task');
    await runPricedTask(kubeconfig);
    const since = Date.now() / 1000;
    const models = await listServedModels(system.demoKey);
    log(`replaying conversations over ${models.join(', ')}`);
    const requests = await replayConversations({
      gateway: GATEWAY,
      apiKey: system.demoKey,
      models,
      conversations: 24,
      turns: 4,
      concurrency: 4,
      ...(opts.turnPauseMs === undefined ? {} : { turnPauseMs: opts.turnPauseMs }),
    });
    log('tightening admission for a burst');
    const refused = await burstPastAdmission(kubeconfig, system.demoKey);
    // Rates need two scrapes of each target after the traffic.
    const url = prometheus.url;
    await eventually(
      async () => {
        if ((await countSeries(url, 'cacheroute_gateway_admission_rejections_total')) === 0)
          throw new Error('Prometheus has not scraped the refusals yet');
      },
      { timeoutMs: 30_000, intervalMs: 1000 },
    );
    await new Promise((r) => setTimeout(r, 5_000));
    const evaluation = await evaluatePanels(url, opts.panels);
    await opts.afterEvaluation?.(url, since);
    return { ...evaluation, requests, refused };
  } finally {
    await prometheus?.stop();
    await system?.stop();
  }
}
