// A runtime SIGTERMed directly, with no preStop and before the routing table
// knows (a process signalled by something other than the kubelet), under
// steady load: SGLang then answers /ready 503 but serves whatever it is sent,
// and exits only at a 5 s watchdog wake that finds nothing in flight. The
// gateway (its own process, server.ts) sees the 503 at its next /ready poll
// and sends the runtime nothing new, so the runtime exits on its own and no
// request is lost. A gateway that kept sending would keep it alive until the
// kubelet's SIGKILL, which cuts the streams it holds. Simulators and the
// gateway are real processes here; the routing table is a --routes file that
// never changes.

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnSim, type SimProcess } from '../../test/support/sim/process.ts';
import { spawnGateway } from '../../test/support/gateway/gateway-process.ts';

const READY_POLL_MS = 1000;
const READY_POLL_SLACK_MS = 2000;
/** What the kubelet waits after SIGTERM before SIGKILL (the pod's grace, shortened for the test). */
const GRACE_MS = 15_000;
const CLIENTS = 6;

const children: ChildProcess[] = [];
const dir = mkdtempSync(path.join(os.tmpdir(), 'cacheroute-runtime-drain-'));

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function startSimProcess(): Promise<SimProcess> {
  // 20 ms decode steps: an answer of 8 tokens is in flight about 170 ms, so six clients keep
  // every runtime busy at any moment.
  const sim = await spawnSim(['--model-path', 'm', '--sim-decode-base-ms', '20']);
  children.push(sim.proc);
  return sim;
}

function writeRoutes(sims: readonly SimProcess[]): string {
  const file = path.join(dir, 'routes.json');
  const endpoints = sims.map((s, i) => ({
    id: `sim${i}`,
    url: s.url,
    fingerprint: 'fp',
    verified: true,
    ready: true,
  }));
  const route = { model: 'm', deployment: 'ns/m', fingerprint: 'fp', salt: 's', endpoints };
  // Round-robin: without the runtime's word, every third request goes to the SIGTERMed one.
  writeFileSync(file, JSON.stringify([{ ...route, routing: { policy: 'round-robin' } }]));
  return file;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

interface Answer {
  readonly sentAt: number;
  readonly endpoint: string;
  /** '' when whole (200, a stream's [DONE] or a complete body); else what went wrong. */
  readonly loss: string;
}

async function ask(gateway: string, n: number, i: number): Promise<Answer> {
  const stream = (n + i) % 2 === 0;
  const sentAt = performance.now();
  try {
    const res = await fetch(`${gateway}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', prompt: `client ${n} asks ${i}`, max_tokens: 8, stream }),
    });
    const text = await res.text();
    const done = stream ? text.includes('data: [DONE]') : text.includes('"choices"');
    const endpoint = res.headers.get('x-cacheroute-endpoint') ?? '';
    return {
      sentAt,
      endpoint,
      loss: res.status === 200 && done ? '' : `${res.status} ${text.slice(0, 120)}`,
    };
  } catch (err) {
    return { sentAt, endpoint: '', loss: String((err as Error).cause ?? err) };
  }
}

describe('a runtime SIGTERMed directly under load', () => {
  it(
    'gets nothing new after the next /ready poll, exits on its own within its watchdog period, and no request is lost',
    { timeout: 60_000 },
    async () => {
      const sims = await Promise.all([startSimProcess(), startSimProcess(), startSimProcess()]);
      const gateway = await spawnGateway(writeRoutes(sims), [
        '--runtime-ready-interval-ms',
        String(READY_POLL_MS),
      ]);
      children.push(gateway.proc);

      let running = true;
      const answers: Answer[] = [];
      const client = async (n: number): Promise<void> => {
        for (let i = 0; running; i++) answers.push(await ask(gateway.url, n, i));
      };
      const clients = Array.from({ length: CLIENTS }, (_, n) => client(n));
      await sleep(1000);

      const [victim] = sims as [SimProcess, ...SimProcess[]];
      const signalledAt = performance.now();
      victim.proc.kill('SIGTERM');
      // The kubelet: SIGKILL once the grace is over, if the runtime is still there.
      const kill = setTimeout(() => victim.proc.kill('SIGKILL'), GRACE_MS);
      const [code, signal] = await victim.exited;
      const exitedAfterMs = performance.now() - signalledAt;
      clearTimeout(kill);
      // The others keep serving, and the clients keep sending for a second past the poll's
      // deadline below: a victim that drained within that deadline left `after` empty.
      await sleep(
        Math.max(1000, signalledAt + READY_POLL_MS + READY_POLL_SLACK_MS + 1000 - performance.now()),
      );
      running = false;
      await Promise.all(clients);
      gateway.proc.kill('SIGTERM');
      await gateway.exited;

      // Sent once the gateway had asked /ready at least once since the signal (plus slack for
      // a loaded machine, where the poll itself runs late).
      const after = answers.filter((a) => a.sentAt > signalledAt + READY_POLL_MS + READY_POLL_SLACK_MS);
      const byVictim = answers.filter((a) => a.endpoint === 'sim0');
      process.stderr.write(
        `[runtime-drain] ${JSON.stringify({
          answers: answers.length,
          servedByVictim: byVictim.length,
          lost: answers.filter((a) => a.loss !== '').length,
          lastSentToVictimMs: Math.round(Math.max(...byVictim.map((a) => a.sentAt)) - signalledAt),
          exitedAfterMs: Math.round(exitedAfterMs),
          exit: { code, signal },
        })}\n`,
      );
      expect({
        exit: { code, signal },
        lost: answers.filter((a) => a.loss !== '').map((a) => a.loss),
        servedByVictimAfterPoll: after.filter((a) => a.endpoint === 'sim0').length,
      }).toEqual({ exit: { code: 0, signal: null }, lost: [], servedByVictimAfterPoll: 0 });
      // Exit code 0, not the kubelet's SIGKILL at the grace end, is what says the runtime ran
      // out of work on its own (how soon is logged above, not asserted: a loaded machine
      // stretches it). The clients kept sending after the poll, so the check above is not empty.
      expect(after.length).toBeGreaterThan(0);
    },
  );
});
