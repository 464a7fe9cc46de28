// The daily cap on paid calls, against the real API server: the ledger is a
// ConfigMap per namespace that outlives the operator, and concurrent
// reservations (two operators in a rollout, many tasks at once) never spend
// past the cap, because every write carries the resourceVersion it read.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Budget } from '../../../operator/src/controllers/task/attempt/budget.ts';
import { parseDecimal } from '../../../operator/src/controllers/task/attempt/budget.ts';
import { DailyCapLedger } from '../../../operator/src/controllers/task/daily-cap-store.ts';
import { LEDGER_CONFIGMAP, parseDailyCap } from '../../../operator/src/controllers/task/daily-cap.ts';
import { KubeClient } from '#kube/client.ts';
import { Resources } from '#kube/resources.ts';
import { createTestNamespace } from '../../support/kubectl.ts';

const kubeconfig = inject('kubeconfig');
let clients: KubeClient[] = [];

beforeAll(async () => {
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  // Two clients: two operator processes (a rollout's surge pod beside the old one).
  clients = [await KubeClient.fromKubeConfig(kc), await KubeClient.fromKubeConfig(kc)];
});
afterAll(async () => Promise.all(clients.map((c) => c.close())));

const cap = (text: string) => {
  const c = parseDailyCap(text);
  if (!c.ok) throw new Error(c.error);
  return c.value;
};
const budget = (currency = 'USD'): Budget => ({ maxInputTokens: 1000, currency });
const now = new Date('2026-12-01T10:00:00Z');

describe('daily cap ledger (ConfigMap per namespace)', () => {
  it('reserves while the cap holds, refuses past it with the reason, and settles to the cost', async () => {
    const ns = await createTestNamespace(kubeconfig, 'cap');
    const [client] = clients as [KubeClient];
    const ledger = new DailyCapLedger(client, cap('1 USD'));
    expect(await ledger.reserve(ns, budget(), parseDecimal('0.6'), now)).toEqual({
      ok: true,
      value: undefined,
    });
    const refused = await ledger.reserve(ns, budget(), parseDecimal('0.5'), now);
    expect(refused).toMatchObject({
      ok: false,
      error: { reason: 'DailyCapReached', code: 'DailyCapReached' },
    });
    expect(refused.ok ? '' : refused.error.message).toContain(
      `namespace ${ns} spent 0.6 of its daily cap of 1 USD on paid calls today (UTC)`,
    );
    // The call cost 0.1 of its 0.6 reservation: the headroom comes back.
    await ledger.settle(ns, now, parseDecimal('0.1') - parseDecimal('0.6'), now);
    expect(await ledger.reserve(ns, budget(), parseDecimal('0.5'), now)).toMatchObject({ ok: true });
    expect(await ledger.spentToday(ns, now)).toBe(parseDecimal('0.6'));
    // Another currency is refused: the operator does not convert money.
    expect(await ledger.reserve(ns, budget('EUR'), 1n, now)).toMatchObject({
      ok: false,
      error: { code: 'DailyCapCurrency' },
    });
    // Durable: a new ledger (a restarted operator) reads what was spent; tomorrow starts at 0.
    const restarted = new DailyCapLedger(client, cap('1 USD'));
    expect(await restarted.spentToday(ns, now)).toBe(parseDecimal('0.6'));
    expect(await restarted.spentToday(ns, new Date('2026-12-02T00:00:01Z'))).toBe(0n);
    const cm = await client.get<{ data?: Record<string, string> }>(
      Resources.configMaps,
      ns,
      LEDGER_CONFIGMAP,
    );
    expect(cm?.data).toEqual({ '2026-12-01.USD': '0.6' });
  });

  it('never spends past the cap under concurrent reservations from two operators', async () => {
    const ns = await createTestNamespace(kubeconfig, 'cap');
    const ledgers = clients.map((c) => new DailyCapLedger(c, cap('1 USD')));
    // 24 reservations of 0.1 against a cap of 1: exactly 10 may pass, whoever writes first.
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        (ledgers[i % 2] as DailyCapLedger).reserve(ns, budget(), parseDecimal('0.1'), now),
      ),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(10);
    expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.error.code === 'DailyCapReached')).toBe(true);
    expect(await (ledgers[0] as DailyCapLedger).spentToday(ns, now)).toBe(parseDecimal('1'));
  });
});
