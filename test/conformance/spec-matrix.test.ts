// The invariant the API promises: a Deployment the API server accepts (zod and
// its CEL twins) renders launch arguments the pinned SGLang starts with. Every
// spec of the matrix and of the random set goes through the API's validation;
// every accepted one is rendered and each engine's command line goes through
// SGLang's own parser and startup checks (the kit's check-args). A spec we
// accept that SGLang refuses is a disagreement.
//
// The second half holds the simulator's startup rules (startup-checks.ts) to
// SGLang's: a matrix of raw command lines, including combinations the renderer
// never produces, must be refused by both or by neither.
import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource } from '#api';
import { buildDesired } from '../../operator/src/controllers/deployment/desired.ts';
import { parseSglangArgs } from '#sglang/flags.ts';
import { checkSglangArgs } from '#sglang/startup-checks.ts';
import { recordConformance } from '../support/conformance-report.ts';
import { expandArgs } from '../support/container-args.ts';
import { kvEventsConfigArgs, PLACEHOLDER_EVENT_PORTS } from '../support/kv-events-config.ts';
import { checkArgs, type CheckArgsRequest } from '../support/sglang-kit.ts';
import {
  buildRandomSpecs,
  buildSampleSpecs,
  buildSpecMatrix,
  cartesian,
  kitModelFor,
  type GeneratedSpec,
} from './spec-space.ts';

const RANDOM_SPECS = 200;
// What the LWS pod webhook gives the first worker of group 0 of a set named m-sglang.
const LWS_ENV = new Map([
  ['LWS_LEADER_ADDRESS', 'm-sglang-0.m-sglang.ns'],
  ['LWS_WORKER_INDEX', '1'],
  ['LWS_GROUP_SIZE', '2'],
]);
const RANDOM_SEED = 20261201;

interface Rendered {
  readonly spec: GeneratedSpec;
  readonly requests: CheckArgsRequest[];
}

function render(spec: GeneratedSpec): Rendered | undefined {
  const valid = validateResource(spec.manifest);
  if (!valid.ok) return undefined;
  const root = valid.value as DeploymentResource;
  const model = kitModelFor(root.spec.model.family);
  const desired = buildDesired(root);
  const requests = desired.workloads.map((w, i) => ({
    id: `${spec.label} [${w.metadata?.name ?? i}]`,
    argv: w.spec?.template.spec?.containers[0]?.args ?? [],
    model,
  }));
  // A multi-node engine's leader and a worker, with the env LWS injects as the kubelet expands it.
  for (const set of desired.groupSets) {
    const t = set.spec.leaderWorkerTemplate;
    for (const [rank, template] of [
      ['leader', t.leaderTemplate],
      ['worker', t.workerTemplate],
    ] as const) {
      requests.push({
        id: `${spec.label} [${set.metadata.name ?? ''} ${rank}]`,
        argv: expandArgs(template.spec?.containers[0]?.args ?? [], LWS_ENV),
        model,
      });
    }
  }
  return { spec, requests };
}

/** One check per distinct (model, argv): many specs render the same engine. */
async function checkDistinct(requests: readonly CheckArgsRequest[]) {
  const key = (r: CheckArgsRequest) => `${r.model ?? ''}\u0000${r.argv.join('\u0000')}`;
  const distinct = [...new Map(requests.map((r) => [key(r), r])).values()];
  const results = await checkArgs(distinct);
  const byKey = new Map(distinct.map((r, i) => [key(r), results[i]]));
  return { distinct: distinct.length, verdict: (r: CheckArgsRequest) => byKey.get(key(r)) };
}

describe('valid spec => SGLang starts', () => {
  it('every spec the API accepts renders arguments SGLang 0.5.23 accepts', async () => {
    const samples = buildSampleSpecs();
    const specs = [...samples, ...buildSpecMatrix(), ...buildRandomSpecs(RANDOM_SPECS, RANDOM_SEED)];
    const rendered = specs.map(render).filter((r): r is Rendered => r !== undefined);
    // Every sample is a valid spec: the API accepts it, so SGLang must start with it.
    expect(rendered.filter((r) => r.spec.label.startsWith('sample')).length).toBe(samples.length);
    const requests = rendered.flatMap((r) => r.requests);
    const { distinct, verdict } = await checkDistinct(requests);
    const disagreements = requests
      .filter((r) => verdict(r)?.ok !== true)
      .map((r) => `${r.id}: ${verdict(r)?.error ?? 'no verdict'}\n  ${r.argv.join(' ')}`);
    recordConformance('spec-matrix', { specs_checked: specs.length, disagreements: disagreements.length });
    console.info(
      `spec matrix: ${specs.length} specs, ${rendered.length} accepted by the API, ${requests.length} engines, ${distinct} distinct command lines checked by SGLang, ${disagreements.length} disagreements`,
    );
    // The API must accept some of each shape, or the invariant holds vacuously.
    expect(rendered.some((r) => r.requests.length === 2)).toBe(true);
    expect(rendered.some((r) => r.requests.some((q) => q.id.endsWith(' worker]')))).toBe(true);
    expect(rendered.some((r) => r.spec.label.startsWith('random'))).toBe(true);
    expect(disagreements).toEqual([]);
  });
});

// Raw command lines over the flags the startup rules read, on a DSA model (which HiSparse needs).
function buildArgvMatrix(): CheckArgsRequest[] {
  const out: CheckArgsRequest[] = [];
  const modes = [[], ['--disaggregation-mode', 'prefill'], ['--disaggregation-mode', 'decode']];
  const transfers = [
    ['--disaggregation-transfer-backend', 'mooncake'],
    ['--disaggregation-transfer-backend', 'fake'],
    ['--disaggregation-transfer-backend', 'mooncake_tcp'],
  ];
  const radix = [[], ['--disable-radix-cache'], ['--disaggregation-decode-enable-radix-cache']];
  const hicache = [
    [],
    ['--enable-hierarchical-cache'],
    ['--enable-hierarchical-cache', '--hicache-host-memory-mode', 'buffer_only'],
    ['--hicache-host-memory-mode', 'buffer_only'],
  ];
  const storage = [[], ['--hicache-storage-backend', 'file']];
  const sparse = [[], ['--enable-hisparse'], ['--enable-hisparse', '--enable-mixed-chunk']];
  const events = [
    [],
    ['--load-publish-endpoint', 'auto'],
    [...kvEventsConfigArgs(PLACEHOLDER_EVENT_PORTS), '--load-publish-endpoint', 'auto'],
  ];
  // The native gRPC listener against the API keys (the operator always renders --api-key).
  const grpc = [['--grpc-port', '50051'], ['--grpc-port', '50051', '--grpc-mode'], ['--smg-grpc-mode']];
  const keys = [[], ['--api-key', 'k'], ['--admin-api-key', 'k']];
  for (const [g, k] of cartesian(grpc, keys)) {
    const argv = ['--model-path', '/models', ...g, ...k];
    out.push({ id: argv.slice(2).join(' '), argv, model: 'deepseek-v3.2' });
  }
  // Replicas across nodes: SGLang's split of the ranks over the nodes and its refusal of DP across them.
  for (const [nodes, tp, dp, rank] of cartesian(
    ['2', '3', '4'],
    ['1', '2', '4', '8'],
    ['1', '2'],
    ['0', '1'],
  )) {
    const argv = ['--model-path', '/models', '--tp-size', tp, '--dp-size', dp, '--nnodes', nodes];
    argv.push('--node-rank', rank, '--dist-init-addr', 'm-sglang-0.m-sglang.ns:20000');
    out.push({ id: argv.slice(2).join(' '), argv, model: 'llama' });
  }
  // Priority scheduling takes the fcfs and lof policies only; without it any policy goes.
  for (const [p, s] of cartesian([[], ['--enable-priority-scheduling']], ['fcfs', 'lof', 'lpm'])) {
    const argv = ['--model-path', '/models', ...p, '--schedule-policy', s];
    out.push({ id: argv.slice(2).join(' '), argv, model: 'llama' });
  }
  // The event publishers are independent of the cache flags: each mode, without the product.
  for (const [m, e] of cartesian(modes, events.slice(1))) {
    const argv = ['--model-path', '/models', ...m, ...(m.length > 0 ? (transfers[0] ?? []) : []), ...e];
    out.push({ id: argv.slice(2).join(' '), argv, model: 'deepseek-v3.2' });
  }
  for (const [m, r, h, s, x] of cartesian(modes, radix, hicache, storage, sparse)) {
    for (const t of m.length === 0 ? [[]] : transfers) {
      const argv = ['--model-path', '/models', ...m, ...t, ...r, ...h, ...s, ...x];
      out.push({ id: argv.slice(2).join(' ') || '(defaults)', argv, model: 'deepseek-v3.2' });
    }
  }
  return out;
}

describe("the simulator's startup rules agree with SGLang's", () => {
  it('refuses exactly the command lines SGLang refuses', async () => {
    const requests = buildArgvMatrix();
    const results = await checkArgs(requests);
    const disagreements: string[] = [];
    let refusedBySglang = 0;
    requests.forEach((r, i) => {
      const sglang = results[i];
      const parsed = parseSglangArgs(r.argv);
      const ours = parsed.ok ? checkSglangArgs(parsed.value.args)[0]?.message : parsed.error.message;
      if (sglang?.ok === false) refusedBySglang++;
      if ((ours === undefined) !== (sglang?.ok === true)) {
        disagreements.push(
          `${r.id}: SGLang ${sglang?.ok ? 'starts' : `refuses (${sglang?.error})`}, ours ${ours ?? 'starts'}`,
        );
      } else if (ours !== undefined && sglang?.error && !sglang.error.includes(ours.slice(0, 60))) {
        disagreements.push(`${r.id}: both refuse, but SGLang says "${sglang.error}" and ours "${ours}"`);
      }
    });
    recordConformance('startup-rules', {
      specs_checked: requests.length,
      disagreements: disagreements.length,
    });
    console.info(
      `startup rules: ${requests.length} command lines, ${refusedBySglang} refused by SGLang, ${disagreements.length} disagreements`,
    );
    expect(refusedBySglang).toBeGreaterThan(0);
    expect(disagreements).toEqual([]);
  });
});
