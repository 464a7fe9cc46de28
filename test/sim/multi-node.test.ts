// A multi-node replica's ranks, as SGLang 0.5.23 launches them (ADR 0018): rank 0 serves the
// API; a node of rank 1 and up serves only its health server, without the API key middleware.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSimArgs } from './config.ts';
import { postJson, startSim, type RunningSim } from '../support/sim/testing.ts';

const GROUP = ['--model-path', '/models', '--tp-size', '8', '--nnodes', '2', '--api-key', 'k'];
const ADDR = ['--dist-init-addr', 'm-sglang-0.m-sglang.ns:20000'];

describe('multi-node ranks', () => {
  let leader: RunningSim;
  let worker: RunningSim;
  beforeAll(async () => {
    leader = await startSim([...GROUP, '--node-rank', '0', ...ADDR]);
    worker = await startSim([...GROUP, '--node-rank', '1', ...ADDR]);
  });
  afterAll(async () => {
    await leader?.close();
    await worker?.close();
  });

  it('rank 0 serves the API behind its key', async () => {
    const info = await fetch(`${leader.url}/server_info`, { headers: { authorization: 'Bearer k' } });
    expect(info.status).toBe(200);
    expect(((await info.json()) as { nnodes?: number }).nnodes).toBe(2);
  });

  it('a worker rank answers /health, /health_generate and /ping with 200, without a key', async () => {
    for (const path of ['/health', '/health_generate', '/ping']) {
      const r = await fetch(`${worker.url}${path}`);
      expect(r.status, path).toBe(200);
      expect(await r.text()).toBe('');
    }
  });

  it('a worker rank serves no API: FastAPI 404', async () => {
    const info = await fetch(`${worker.url}/server_info`, { headers: { authorization: 'Bearer k' } });
    expect(info.status).toBe(404);
    expect(await info.json()).toEqual({ detail: 'Not Found' });
    const gen = await postJson(`${worker.url}/generate`, { text: 'hi' });
    expect(gen.status).toBe(404);
  });

  it("refuses what SGLang's startup checks refuse across nodes", () => {
    const uneven = parseSimArgs(['--model-path', '/m', '--tp-size', '6', '--nnodes', '4', ...ADDR]);
    expect(uneven.ok ? '' : uneven.error).toContain('tp_size must be divisible by number of nodes');
    const dp = parseSimArgs(['--model-path', '/m', '--tp-size', '2', '--dp-size', '2', '--nnodes', '2']);
    expect(dp.ok ? '' : dp.error).toContain('multi-node data-parallel replicas are not supported');
  });
});
