// The routing bench's gateway tier, as a file: which replicas there are and
// where each one's load exchange listens. In a cluster the gateway learns
// this from its Service's EndpointSlices (discovery/peer-slices.ts), every
// replica on one port; the bench's replicas are processes on one host, each
// exchange on a port the kernel picked, so the bench writes the tier here
// (writeTierFile) and each replica follows it (FileTierPeers), as a replica
// follows the slices: a replica killed leaves the file, one restarted joins.

import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { PeerSet } from '../../gateway/src/fleet/peers.ts';
import { replaceFile } from '../support/replace-file.ts';

const TierFile = z.object({
  replicas: z.array(z.object({ name: z.string().min(1), exchange: z.string().startsWith('tcp://') })),
});
export type TierMember = z.infer<typeof TierFile>['replicas'][number];

/** The tier, replaced whole (a rename: a reader never sees half a file). */
export function writeTierFile(file: string, replicas: readonly TierMember[]): void {
  replaceFile(file, JSON.stringify({ replicas }, null, 2));
}

/** The tier in a file's text; none when it is not a tier file. */
function parseTier(raw: string): TierMember[] {
  try {
    const parsed = TierFile.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data.replicas : [];
  } catch {
    return [];
  }
}

/** The tier in `file` now; none while the file is missing. */
export function readTierFile(file: string): TierMember[] {
  try {
    return parseTier(readFileSync(file, 'utf8'));
  } catch {
    return [];
  }
}

/**
 * A replica's view of the tier in `file`, re-read every `everyMs`: members by name (admission
 * shares and the policy's rank), and the other replicas' exchange addresses to dial.
 */
export class FileTierPeers implements PeerSet {
  readonly self: string;
  readonly #file: string;
  readonly #timer: ReturnType<typeof setInterval>;
  #raw = '';
  #members: readonly string[];
  #endpoints: readonly string[] = [];

  constructor(file: string, self: string, everyMs = 250) {
    this.self = self;
    this.#file = file;
    this.#members = [self];
    this.#reload();
    this.#timer = setInterval(() => this.#reload(), everyMs);
    this.#timer.unref();
  }

  members(): readonly string[] {
    return this.#members;
  }

  exchangeEndpoints(): readonly string[] {
    return this.#endpoints;
  }

  close(): void {
    clearInterval(this.#timer);
  }

  #reload(): void {
    let raw: string;
    try {
      raw = readFileSync(this.#file, 'utf8');
    } catch {
      return; // not written yet: this replica alone until it is
    }
    if (raw === this.#raw) return; // same tier: the same arrays (tier-position.ts recomputes on change)
    this.#raw = raw;
    const replicas = parseTier(raw);
    if (replicas.length === 0) return;
    const names = replicas.map((r) => r.name);
    this.#members = names.includes(this.self) ? names : [...names, this.self];
    this.#endpoints = replicas.filter((r) => r.name !== this.self).map((r) => r.exchange);
  }
}
