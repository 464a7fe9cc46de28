// The warm-up's own count of what it did with each document: prefilled on a
// replica, or left to the replica to load from a shared L3 tier that holds it
// (ADR 0042). With an L3 tier, prefill should grow by the documents once per
// role, identity and salt while storage grows with every new replica.
import { Counter, type Registry } from 'prom-client';
import type { WarmupSource } from '#api';

export const WARMUP_DOCUMENTS_METRIC = 'cacheroute_warmup_documents_total';

export type WarmupDocumentsCounter = Counter<'source'>;

export function registerWarmupMetrics(registry: Registry): WarmupDocumentsCounter {
  return new Counter({
    name: WARMUP_DOCUMENTS_METRIC,
    help: 'Warm-up documents by source: prefill (computed on a replica) or storage (the replica loads them from the shared L3 tier).',
    labelNames: ['source'],
    registers: [registry],
  });
}

export function countWarmupDocuments(
  counter: WarmupDocumentsCounter,
  source: WarmupSource,
  documents: number,
) {
  counter.inc({ source }, documents);
}
