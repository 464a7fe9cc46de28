// The long-lived kit (`kit session`, hack/sglang/cacheroute_kit/session.py)
// answers as a fresh `kit.sh` process does: the same stdout for the same
// command, nothing carried from one command to the next, a failing command's
// exit code and message, and a refusal for the commands it does not serve.
// The suites that ask SGLang many times (kv-events-real, sim-responses) rely
// on it being a stand-in for the process, not a different answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKit } from '../support/sglang-kit.ts';
import { openKitSession, type KitSession } from '../support/sglang-kit-session.ts';
import { treeEvents, type TreeOp } from '../support/sglang-kit-events.ts';

const ids = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

// A store, a salted store, a partial match, an eviction and a flush: every kind of operation.
const OPS: readonly TreeOp[] = [
  { op: 'take' },
  { op: 'match', tokens: ids(100, 39) },
  { op: 'insert', tokens: ids(100, 40) },
  { op: 'take' },
  { op: 'insert', tokens: ids(100, 40), cache_salt: 'tenant-a' },
  { op: 'match', tokens: ids(100, 20), extra_key: 'x' },
  { op: 'take' },
  { op: 'evict', tokens: 16 },
  { op: 'take' },
  { op: 'reset' },
  { op: 'take' },
];

describe('the kit session', () => {
  let kit: KitSession;
  beforeAll(() => {
    kit = openKitSession();
  });
  afterAll(async () => {
    await kit?.close();
  });

  it('answers tree-events as a fresh process does, with a fresh tree each time', async () => {
    const input = `${OPS.map((o) => JSON.stringify(o)).join('\n')}\n`;
    const args = ['tree-events', '--page-size', '16'];
    const [fresh, first] = await Promise.all([runKit(args, input), kit.run(args, input)]);
    expect(first).toBe(fresh);
    // The second run starts from an empty tree again: the same stores, not "already cached".
    expect(await kit.run(args, input)).toBe(fresh);
    const takes = await treeEvents(16, OPS, kit.run);
    expect(takes.map((t) => t.map((e) => e.type))).toEqual([
      ['AllBlocksCleared'],
      ['BlockStored'],
      ['BlockStored'],
      ['BlockRemoved'],
      ['AllBlocksCleared'],
    ]);
  });

  it("reports a failing command's exit code and message, and goes on answering", async () => {
    await expect(kit.run(['tree-events', '--page-size', '16'], '{"op": "grow"}\n')).rejects.toThrow(
      /kit tree-events exited 1:[\s\S]*unknown op 'grow'/,
    );
    await expect(kit.run(['tree-events'])).rejects.toThrow(
      /kit tree-events exited 2:[\s\S]*the following arguments are required: --page-size/,
    );
    await expect(kit.run(['check-args', '--model-path', '/m'])).rejects.toThrow(
      /exited 2:[\s\S]*'check-args' is not served in-process/,
    );
    await expect(kit.run(['decode-events', '--endpoint', 'tcp://127.0.0.1:1'])).rejects.toThrow(
      /exited 2:[\s\S]*decode-events needs --drain or --stdin/,
    );
    expect(await treeEvents(16, [{ op: 'take' }], kit.run)).toEqual([[{ type: 'AllBlocksCleared' }]]);
  });
});
