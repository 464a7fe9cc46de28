// The committed flag table (lib/sglang/sglang-flags.json, which the
// operator renders from and the simulator parses with) is what the pinned
// SGLang's own parser declares, flag by flag. `make sglang-flags` regenerates it.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { recordConformance } from '../support/conformance-report.ts';
import { DumpedFlags, dumpFlags } from '../support/sglang-kit.ts';

const COMMITTED = resolve(import.meta.dirname, '../../lib/sglang/sglang-flags.json');
const PINNED = resolve(import.meta.dirname, '../../lib/sglang/version.json');

describe('the flag catalogue against SGLang', () => {
  it('names every flag, alias, kind, type, choice and default as the pinned SGLang does', async () => {
    const live = await dumpFlags();
    const committed = DumpedFlags.parse(JSON.parse(readFileSync(COMMITTED, 'utf8')));
    const pinned = (JSON.parse(readFileSync(PINNED, 'utf8')) as { sglang: string }).sglang;
    const byName = new Map(committed.flags.map((f) => [f.name, f]));
    const drift: string[] = [];
    for (const flag of live.flags) {
      const ours = byName.get(flag.name);
      if (!ours) drift.push(`${flag.name}: missing from the catalogue`);
      else if (JSON.stringify(ours) !== JSON.stringify(flag)) drift.push(`${flag.name}: differs`);
      byName.delete(flag.name);
    }
    for (const name of byName.keys()) drift.push(`${name}: not a flag of SGLang ${live.sglang}`);
    recordConformance('flag-catalogue', { catalogue_drift: drift.length });
    expect(live.sglang).toBe(pinned);
    expect(committed.sglang).toBe(pinned);
    expect(drift, 'run `make sglang-flags` after moving the pin').toEqual([]);
  });
});
