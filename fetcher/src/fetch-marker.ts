// The marker a finished fetch leaves in the model directory, `.cacheroute-verified.json`:
// hidden, so outside the manifest (ADR 0013). It holds the manifest itself, so a later run
// can check names and sizes without the network; its claim is only trusted when that
// manifest reproduces both digests asked for.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { checkDigests } from './fetch-digests.ts';
import { readJsonRecord, writeJsonRecord } from './json-record.ts';
import { manifestFromEntries, type Manifest } from './manifest.ts';

export const MARKER_FILE = '.cacheroute-verified.json';

export const FetchMarker = z.object({
  version: z.literal(1),
  /** Where the files came from: a hub commit, or an object store's prefix. */
  repo: z.string().optional(),
  revision: z.string().optional(),
  url: z.string().optional(),
  digest: z.string(),
  tokenizerDigest: z.string(),
  tokenizerSubpath: z.string().optional(),
  files: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  verifiedAt: z.string(),
  manifest: z.array(z.object({ path: z.string(), size: z.number(), sha256: z.string() })),
});
export type FetchMarker = z.infer<typeof FetchMarker>;

/** The marker's manifest when it reproduces the digests asked for; undefined otherwise. */
export function manifestFromMarker(
  marker: FetchMarker,
  expected: { digest: string; tokenizerDigest: string; tokenizerSubpath?: string | undefined },
): Manifest | undefined {
  if (marker.tokenizerSubpath !== expected.tokenizerSubpath) return undefined;
  const manifest = manifestFromEntries(marker.manifest);
  if (!manifest.ok) return undefined;
  return checkDigests(manifest.value, expected, expected.tokenizerSubpath).ok ? manifest.value : undefined;
}

/** The marker in `dir`, or undefined when there is none or it is not one of ours. */
export function readMarker(dir: string): Promise<FetchMarker | undefined> {
  return readJsonRecord(join(dir, MARKER_FILE), FetchMarker);
}

export async function writeMarker(dir: string, marker: FetchMarker): Promise<void> {
  await writeJsonRecord(join(dir, MARKER_FILE), `${JSON.stringify(marker, null, 2)}\n`);
}

export async function removeMarker(dir: string): Promise<void> {
  await rm(join(dir, MARKER_FILE), { force: true });
}
