// Prefill/decode requests (reference §3): the same request goes to a prefill
// and a decode server at once, with bootstrap_host/port naming the prefill's
// bootstrap server and a random bootstrap_room; the decode's answer is the
// client's. A disaggregated SGLang server, prefill included, refuses a
// request without a room (managers/scheduler.py), and a request sent with the
// fake bootstrap host SGLang's own health check uses (2.2.2.2) is computed
// but never inserted in the radix cache (managers/schedule_batch.py
// skip_radix_cache_insert): a real pair is the only way to warm a prefill.
import { findFlag } from './catalogue.ts';

/** SGLang's default --disaggregation-bootstrap-port. */
export const DEFAULT_BOOTSTRAP_PORT = Number(findFlag('--disaggregation-bootstrap-port')?.default ?? 8998);

// A type, not an interface: callers spread it into request bodies typed as records.
export type BootstrapFields = {
  bootstrap_host: string;
  bootstrap_port: number;
  bootstrap_room: number;
};

/**
 * A room id in [0, 2^53): SGLang takes [0, 2^63-1], but JSON numbers above
 * 2^53 lose precision in JavaScript; 53 random bits keep collisions negligible.
 * `random32` returns a uniformly random unsigned 32-bit integer.
 */
export function computeBootstrapRoom(random32: () => number): number {
  return (random32() >>> 11) * 0x100000000 + (random32() >>> 0);
}

/** A uniform 32-bit integer from a [0, 1) source such as Math.random. */
export function toRandom32(random: () => number): () => number {
  return () => Math.floor(random() * 0x100000000) >>> 0;
}

export function buildBootstrapFields(
  prefillHost: string,
  bootstrapPort: number | undefined,
  room: number,
): BootstrapFields {
  return {
    bootstrap_host: prefillHost,
    bootstrap_port: bootstrapPort ?? DEFAULT_BOOTSTRAP_PORT,
    bootstrap_room: room,
  };
}
