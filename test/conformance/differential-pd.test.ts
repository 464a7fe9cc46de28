// Prefill/decode, differential: a real SGLang 0.5.23 pair (on CPU through `kit
// serve`, KV over Mooncake's TCP transport) and a simulator pair launched with
// the same arguments get the same requests, as the gateway sends them (the same
// body with bootstrap_host/port/room to both parts). Compared as the dense
// differential compares (differential-compare.ts): status codes, content types,
// key sets, JSON types; text, ids and timings aside. Also the bootstrap fields'
// errors: a request with no room (or host and port without one), and a decode
// whose bootstrap server fails. And how long a decode waits for a room whose
// prefill never comes: the wheel's own default against the simulator's.

import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordConformance } from '../support/conformance-report.ts';
import { withFreshPorts } from '../support/fresh-ports.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';
import { ensureSglangKit } from '../support/sglang-kit.ts';
import { SIM_DEFAULTS } from '../sim/config.ts';
import { postJson, startSim, type RunningSim } from '../support/sim/testing.ts';
import { compareObservations } from './differential-compare.ts';
import { LONG_PROMPT, type Observation } from './differential-script.ts';
import type { Mismatch } from './shape-diff.ts';

const MODEL = 'tiny-chat';
const COMMON = ['--served-model-name', MODEL, '--enable-cache-report', '--page-size', '16'];
const mismatches: Mismatch[] = [];

interface Side {
  readonly prefill: string;
  readonly decode: string;
  readonly bootstrapPort: number;
}

/** A port that refuses the bootstrap protocol: every connection is closed at once. */
function startDeadBootstrap(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.destroy());
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const addr = server.address();
      resolve({ server, port: typeof addr === 'object' && addr ? addr.port : 0 });
    });
  });
}

/** SGLANG_DISAGGREGATION_WAITING_TIMEOUT as the pinned SGLang reads it (srt/environ.py), in seconds. */
function readRealWaitingTimeoutSeconds(): number {
  const code = 'from sglang.srt.environ import envs; print(envs.SGLANG_DISAGGREGATION_WAITING_TIMEOUT.get())';
  const env = { ...process.env };
  delete env['SGLANG_DISAGGREGATION_WAITING_TIMEOUT']; // the default, not this shell's
  const out = spawnSync(join(ensureSglangKit(), 'bin', 'python'), ['-c', code], { encoding: 'utf8', env });
  if (out.status !== 0) throw new Error(`reading SGLang's waiting timeout failed: ${out.stderr}`);
  return Number(out.stdout.trim());
}

let room = 1_000;

/** The gateway's PD exchange: the same body, with one room, to both parts at once. */
async function runPdScript(side: Side, deadPort: number): Promise<Map<string, Observation>> {
  const out = new Map<string, Observation>();
  const keep = (name: string, r: { status: number; json: unknown; headers: Headers }): void => {
    const contentType = (r.headers.get('content-type') ?? '').split(';')[0] ?? '';
    out.set(name, { name, status: r.status, contentType, body: r.json });
  };
  const pair = async (name: string, path: string, body: Record<string, unknown>): Promise<void> => {
    const bootstrap = {
      bootstrap_host: '127.0.0.1',
      bootstrap_port: side.bootstrapPort,
      bootstrap_room: room++,
    };
    const [p, d] = await Promise.all([
      postJson(`${side.prefill}${path}`, { ...body, ...bootstrap }),
      postJson(`${side.decode}${path}`, { ...body, ...bootstrap }),
    ]);
    keep(`${name}_prefill`, p);
    keep(`${name}_decode`, d);
  };
  const generate = {
    text: LONG_PROMPT,
    sampling_params: { max_new_tokens: 8, temperature: 0, ignore_eos: true },
  };
  const chat = {
    model: MODEL,
    messages: [{ role: 'user', content: LONG_PROMPT }],
    max_tokens: 8,
    temperature: 0,
  };
  await pair('pd_generate', '/generate', generate);
  await pair('pd_generate_repeat', '/generate', generate);
  await pair('pd_chat', '/v1/chat/completions', chat);
  await pair('pd_chat_repeat', '/v1/chat/completions', chat);
  for (const [role, url] of [
    ['prefill', side.prefill],
    ['decode', side.decode],
  ] as const) {
    keep(`roomless_generate_${role}`, await postJson(`${url}/generate`, generate));
    keep(`roomless_chat_${role}`, await postJson(`${url}/v1/chat/completions`, chat));
    // Host and port without a room: what a client that lost the room field sends.
    keep(
      `partial_bootstrap_${role}`,
      await postJson(`${url}/generate`, {
        ...generate,
        bootstrap_host: '127.0.0.1',
        bootstrap_port: side.bootstrapPort,
      }),
    );
    const info = await fetch(`${url}/server_info`);
    out.set(`server_info_${role}`, {
      name: `server_info_${role}`,
      status: info.status,
      contentType: (info.headers.get('content-type') ?? '').split(';')[0] ?? '',
      body: pdFields(await info.json()),
    });
  }
  keep(
    'dead_bootstrap_decode',
    await postJson(`${side.decode}/generate`, {
      ...generate,
      bootstrap_host: '127.0.0.1',
      bootstrap_port: deadPort,
      bootstrap_room: room++,
    }),
  );
  return out;
}

/** The server args a PD client reads: the mode, the bootstrap port, the transfer backend. */
function pdFields(info: unknown): Record<string, unknown> {
  const o = info as Record<string, unknown>;
  return Object.fromEntries(
    ['disaggregation_mode', 'disaggregation_bootstrap_port', 'disaggregation_transfer_backend'].map((k) => [
      k,
      o[k],
    ]),
  );
}

function cached(o: Observation | undefined): number {
  const b = o?.body as {
    meta_info?: { cached_tokens?: number };
    usage?: { prompt_tokens_details?: { cached_tokens?: number } };
  };
  return b?.meta_info?.cached_tokens ?? b?.usage?.prompt_tokens_details?.cached_tokens ?? 0;
}

// A decode whose prefill never gets the room (a prefill gone between the two sends) fails the
// room after SGLang's waiting timeout: 300 s in 0.5.23. A simulator that gave up sooner would let a
// test or a bench see a gateway error the real pair only gives five minutes later.
describe('a decode waiting for a room the prefill never gets', () => {
  it("gives up after SGLang's own waiting timeout on the simulator too", () => {
    const realSeconds = readRealWaitingTimeoutSeconds();
    const simSeconds = SIM_DEFAULTS.pdTimeoutMs / 1000;
    if (realSeconds !== simSeconds)
      mismatches.push({ path: 'pd_waiting_timeout', real: `${realSeconds} s`, sim: `${simSeconds} s` });
    expect(simSeconds).toBe(realSeconds);
  });
});

describe('prefill/decode: the real pair and the simulator pair', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-differential-pd-'));
  const model = ['--model-path', join(dir, 'models')];
  let prefill: RealSglang | undefined;
  let decode: RealSglang | undefined;
  let sims: RunningSim[] = [];
  let dead: { server: Server; port: number } | undefined;
  let real: Map<string, Observation>;
  let sim: Map<string, Observation>;

  beforeAll(async () => {
    dead = await startDeadBootstrap();
    // SGLang binds its bootstrap port itself: a port free now, again if it was lost.
    const [p, bootstrapPort] = await withFreshPorts(
      1,
      async ([port = 0]) => {
        const s = await startRealSglang({
          args: [
            ...model,
            ...COMMON,
            '--disaggregation-mode',
            'prefill',
            '--disaggregation-bootstrap-port',
            String(port),
          ],
        });
        return [s, port] as const;
      },
      { what: 'sglang bootstrap' },
    );
    prefill = p;
    decode = await startRealSglang({ args: [...model, ...COMMON, '--disaggregation-mode', 'decode'] });
    const simPrefill = await startSim([
      ...model,
      ...COMMON,
      '--disaggregation-mode',
      'prefill',
      '--disaggregation-transfer-backend',
      'mooncake',
      '--disaggregation-bootstrap-port',
      '0',
    ]);
    // A decode gives up on a bootstrap server that fails (the real one in about 14 s).
    const simDecode = await startSim([
      ...model,
      ...COMMON,
      '--disaggregation-mode',
      'decode',
      '--disaggregation-transfer-backend',
      'mooncake',
      '--sim-pd-timeout-ms',
      '2000',
    ]);
    sims = [simPrefill, simDecode];
    real = await runPdScript({ prefill: p.url, decode: decode.url, bootstrapPort }, dead.port);
    sim = await runPdScript(
      { prefill: simPrefill.url, decode: simDecode.url, bootstrapPort: simPrefill.bootstrapPort ?? 0 },
      dead.port,
    );
  }, 600_000);

  afterAll(async () => {
    recordConformance('differential-pd', { pd_differential_mismatches: mismatches.length });
    await Promise.all([prefill?.stop(), decode?.stop(), ...sims.map((s) => s.close())]);
    dead?.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers the pair, its repeat, and the bootstrap errors with the same shapes and codes', () => {
    const found = compareObservations(real, sim);
    mismatches.push(...found);
    expect(found.map((m) => `${m.path}: real ${m.real} | sim ${m.sim}`).join('\n')).toBe('');
  });

  it("a repeat reports the prefill's cached tokens in both parts' answers, on both", () => {
    for (const side of [real, sim]) {
      for (const name of ['pd_generate_repeat', 'pd_chat_repeat']) {
        expect(cached(side.get(`${name}_prefill`)), name).toBeGreaterThan(0);
        expect(cached(side.get(`${name}_decode`)), name).toBe(cached(side.get(`${name}_prefill`)));
      }
      expect(cached(side.get('pd_generate_decode'))).toBe(0);
    }
  });

  it('reports the same PD server args on both', () => {
    for (const role of ['prefill', 'decode']) {
      const [a, b] = [real.get(`server_info_${role}`)?.body, sim.get(`server_info_${role}`)?.body];
      expect({ ...(b as object), disaggregation_bootstrap_port: 0 }).toEqual({
        ...(a as object),
        disaggregation_bootstrap_port: 0,
      });
    }
  });
});
