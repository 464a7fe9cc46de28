// Rollouts under load on make run's system (hack/local-system.ts: the control plane with KWOK
// GPU nodes, the sim-kubelet, the operator and the gateway as processes): four clients (chat,
// half streamed, rollout-load.ts) keep sending through the gateway while the dense sample
// llama-8b goes through an identity rollout (a new deploymentId) at two replicas and at one,
// and a scale 3 -> 1. Each change is measured from a second before it until a second after
// its Deployment settled (every replica verified on the new identity, no pod of it left,
// terminating ones included). Goal: nothing lost (no 5xx, no unanswered request, no cut
// stream) in every round. Prints a line per change and one JSON line at the end.
//
//   bash hack/in-netns.sh node test/bench/bench-rollout.ts [--rounds=5] [--gpu-nodes=9]
//
// The sample Tenant's rate limit (600 requests a minute) is raised for the run: the clients
// send as fast as they are answered, and a 429 is not what is measured here.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalSystem } from '../../hack/local-system.ts';
import { eventually, kubectlOk } from '../support/kubectl.ts';
import { countLost, startLoad, type LoadCounts } from './rollout-load.ts';

const NAME = 'llama-8b';

function flag(name: string, fallback: number): number {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
  const n = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} wants a whole number above 0, got ${raw}`);
  return n;
}

const rounds = flag('rounds', 5);
const dir = mkdtempSync(join(tmpdir(), 'bench-rollout-'));
const log = (m: string): void => void process.stderr.write(`[bench-rollout] ${m}\n`);
const system = await startLocalSystem({
  dir,
  gpuNodes: flag('gpu-nodes', 9),
  real: false,
  log: () => undefined,
});
const kube = { kubeconfig: system.cp.kubeconfig };
const k = (args: string[]): Promise<string> => kubectlOk(args, kube);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Settled {
  verified: number;
  fingerprints: Set<string>;
  pods: number;
}

async function observe(): Promise<Settled> {
  const sgd = JSON.parse(await k(['get', 'sgd', NAME, '-o', 'json'])) as {
    status?: { verifiedReplicas?: number; endpoints?: { fingerprint?: string; verified?: boolean }[] };
  };
  const pods = JSON.parse(
    await k(['get', 'pods', '-l', `cacheroute.dev/deployment=${NAME}`, '-o', 'json']),
  ) as {
    items: unknown[];
  };
  const endpoints = sgd.status?.endpoints ?? [];
  return {
    verified: sgd.status?.verifiedReplicas ?? 0,
    fingerprints: new Set(endpoints.map((e) => e.fingerprint ?? '')),
    pods: pods.items.length,
  };
}

/** Every replica verified on one identity, and no other pod of the Deployment left (terminating ones too). */
async function settle(replicas: number): Promise<void> {
  await eventually(
    async () => {
      const s = await observe();
      if (s.verified !== replicas || s.fingerprints.size !== 1 || s.pods !== replicas)
        throw new Error(`${NAME}: ${s.verified} verified, ${s.fingerprints.size} identities, ${s.pods} pods`);
    },
    { timeoutMs: 300_000, intervalMs: 250 },
  );
}

async function scale(replicas: number): Promise<void> {
  await k(['scale', `sgd/${NAME}`, `--replicas=${replicas}`]);
}

async function newIdentity(tag: string): Promise<void> {
  await k([
    'patch',
    'sgd',
    NAME,
    '--type=merge',
    '-p',
    JSON.stringify({ spec: { deploymentId: `llama-3-1-8b-instruct-${tag}` } }),
  ]);
}

async function measured(what: string, change: () => Promise<void>, replicas: number): Promise<LoadCounts> {
  const load = startLoad({
    gateway: `http://${system.gateway.host}:${system.gateway.port}`,
    apiKey: system.demoKey,
    model: NAME,
  });
  await sleep(1000);
  const started = performance.now();
  await change();
  await settle(replicas);
  const settledMs = performance.now() - started;
  await sleep(1000);
  const counts = await load.stop();
  log(
    `${what}: ${countLost(counts)} lost of ${counts.sent} (${counts.streamed} streamed): 5xx ${JSON.stringify(counts.serverErrors)}, ` +
      `unanswered ${JSON.stringify(counts.unanswered)}, cut streams ${counts.cutStreams}, 4xx ${JSON.stringify(counts.clientErrors)}; ` +
      `settled in ${(settledMs / 1000).toFixed(1)} s${counts.samples.length ? `; e.g. ${counts.samples.join(' | ')}` : ''}`,
  );
  return counts;
}

const results: {
  round: number;
  change: string;
  lost: number;
  sent: number;
  streamed: number;
  counts: LoadCounts;
}[] = [];
try {
  await k([
    'patch',
    'tenant',
    'team-a',
    '--type=merge',
    '-p',
    JSON.stringify({ spec: { limits: { requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000 } } }),
  ]);
  await settle(2);
  for (let round = 1; round <= rounds; round++) {
    const record = (change: string, counts: LoadCounts): void =>
      void results.push({
        round,
        change,
        lost: countLost(counts),
        sent: counts.sent,
        streamed: counts.streamed,
        counts,
      });
    record(
      'identity rollout @2',
      await measured(`round ${round} identity rollout @2`, () => newIdentity(`r${round}a`), 2),
    );
    await scale(1);
    await settle(1);
    record(
      'identity rollout @1',
      await measured(`round ${round} identity rollout @1`, () => newIdentity(`r${round}b`), 1),
    );
    await scale(3);
    await settle(3);
    record('scale 3 -> 1', await measured(`round ${round} scale 3 -> 1`, () => scale(1), 1));
    await scale(2);
    await settle(2);
  }
} finally {
  await system.stop();
  rmSync(dir, { recursive: true, force: true });
}
const cleanRounds = Array.from({ length: rounds }, (_, i) => i + 1).filter((r) =>
  results.filter((x) => x.round === r).every((x) => x.lost === 0),
).length;
process.stdout.write(
  `${JSON.stringify({
    rounds,
    clean_rounds: cleanRounds,
    lost: results.reduce((n, r) => n + r.lost, 0),
    sent: results.reduce((n, r) => n + r.sent, 0),
    changes: results.map(({ round, change, lost, sent, streamed }) => ({
      round,
      change,
      lost,
      sent,
      streamed,
    })),
  })}\n`,
);
