// The gateway as an endpoint picker behind a real Envoy (1.40, GIE's kind of
// bootstrap: ext_proc, ORIGINAL_DST on the picked header) on the full control
// plane: the operator verifies the runtimes (simulators on every pod IP, KV
// events on), the gateway discovers them, Envoy asks its picker for every
// request. Requests reach only verified pods, a conversation stays on its pod,
// a runtime scaled away leaves the pick, and a picker outage fails closed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PickerServer } from '../../gateway/src/epp/server.ts';
import { startEndpointPicker } from '../../gateway/src/server.ts';
import { OPEN_DIRECTORY } from '../../gateway/src/tenancy/tenant.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { startEnvoy, type RunningEnvoy } from '../support/envoy.ts';
import { eventually } from '../support/kubectl.ts';

const NS = 'e2e-picker';
let stack: E2eStack;
let epp: PickerServer | undefined;
let envoy: RunningEnvoy | undefined;

beforeAll(async () => {
  stack = await startE2eStack(NS);
});

afterAll(async () => {
  await envoy?.close();
  await epp?.close();
  await stack?.stop();
});

async function generate(ids: number[]): Promise<{ status: number; endpoint: string | null }> {
  const r = await fetch(`${envoy?.url ?? ''}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama-8b', input_ids: ids, sampling_params: { max_new_tokens: 1 } }),
  });
  await r.text();
  return { status: r.status, endpoint: r.headers.get('x-cacheroute-endpoint') };
}

describe('the endpoint picker behind Envoy on the control plane', () => {
  it('routes only to verified pods, keeps conversations home, drops a pod scaled away, fails closed', async () => {
    const { k, status, gateways } = stack;
    const gateway = gateways[0];
    if (!gateway) throw new Error('no gateway');
    const m = buildDeploymentManifest({ name: 'llama', replicas: 3, gpus: 1 });
    m.spec['events'] = { kvCache: true };
    await k(['apply', '-f', '-'], JSON.stringify(m));
    await k(
      ['apply', '-f', '-'],
      JSON.stringify(buildCachePolicyManifest('team-a', ['llama'], { resultReuse: { enabled: false } })),
    );
    await eventually(async () => expect((await status('llama')).verifiedReplicas).toBe(3), {
      timeoutMs: 90_000,
    });
    await eventually(() => expect(gateway.watcher.table.lookup('llama-8b')?.endpoints).toHaveLength(3), {
      timeoutMs: 30_000,
    });
    epp = await startEndpointPicker(
      gateway.app,
      { mode: 'both', port: 0, healthPort: 0 },
      '127.0.0.1',
      OPEN_DIRECTORY,
      () => gateway.watcher.table.ready,
    );
    envoy = await startEnvoy({ kind: 'picker', pickerPort: epp.port });
    const verified = new Set(((await status('llama')).endpoints ?? []).map((e) => `${NS}/${e.pod}`));

    // Four conversations of three turns: each turn extends its conversation's history.
    const homes = new Map<number, Set<string | null>>();
    const history = Array.from({ length: 4 }, () => [] as number[]);
    for (let turn = 0; turn < 3; turn++)
      for (const [c, h] of history.entries()) {
        for (let i = 0; i < 128; i++) h.push(300 + ((c * 7919 + turn * 131 + i * 17) % 30000));
        const r = await generate(h);
        expect(r.status).toBe(200);
        expect(verified.has(r.endpoint ?? '')).toBe(true);
        homes.set(c, (homes.get(c) ?? new Set()).add(r.endpoint));
        // The runtime's KV events reach the gateway's index before the next turn.
        await new Promise((r) => setTimeout(r, 200));
      }
    for (const [c, set] of homes) expect(set.size, `conversation ${c}`).toBe(1);

    // Scaled to two: the pod scaled away leaves the table, and no pick names it again.
    await k(['scale', 'sgd/llama', '--replicas=2']);
    await eventually(() => expect(gateway.watcher.table.lookup('llama-8b')?.endpoints).toHaveLength(2), {
      timeoutMs: 60_000,
    });
    const left = new Set(gateway.watcher.table.lookup('llama-8b')?.endpoints.map((e) => e.id));
    for (let i = 0; i < 8; i++) {
      const r = await generate([900 + i, 901, 902, 903]);
      expect(r.status).toBe(200);
      expect(left.has(r.endpoint ?? '')).toBe(true);
    }

    // The picker gone (failureMode FailClose): Envoy answers 500 itself.
    await epp.close();
    epp = undefined;
    expect((await generate([1, 2, 3])).status).toBe(500);
  });
});
