// Every launch flag of the pinned SGLang, as its own argparse parser declares
// them (lib/sglang/sglang-flags.json, written by `make sglang-flags`
// from the conformance kit's `dump-flags`, checked against SGLang by
// `make conformance`). The operator renders from it, the simulator parses with
// it and the API takes its choice lists from it, so none of them can offer a
// flag, a choice or a default the pinned SGLang does not have.
import { z } from 'zod';
import table from './sglang-flags.json' with { type: 'json' };
import pinned from './version.json' with { type: 'json' };

/** The SGLang release every rendered command line is for. Moving it: hack/sglang/README.md. */
export const SGLANG_VERSION: string = z.object({ sglang: z.string() }).parse(pinned).sglang;

const FlagValue = z.union([z.string(), z.number(), z.boolean(), z.null()]);

export const CatalogueFlag = z.object({
  name: z.string().startsWith('--'),
  aliases: z.array(z.string()),
  dest: z.string(),
  /** argparse action: store, store_true, boolean_optional (--x / --no-x), ... */
  kind: z.string(),
  /** The value converter: int, float, str, json, human_readable_int, ...; null for flags without a value. */
  type: z.string().nullable(),
  nargs: z.union([z.string(), z.number()]).nullable(),
  choices: z.array(FlagValue).nullable(),
  default: z.union([FlagValue, z.array(FlagValue)]),
});
export type CatalogueFlag = z.infer<typeof CatalogueFlag>;

const Catalogue = z.object({ sglang: z.string(), flags: z.array(CatalogueFlag) });

const catalogue = Catalogue.parse(table);
if (catalogue.sglang !== SGLANG_VERSION) {
  throw new Error(
    `sglang-flags.json is for SGLang ${catalogue.sglang} but the pin is ${SGLANG_VERSION}: run make sglang-flags`,
  );
}

export const SGLANG_FLAGS: readonly CatalogueFlag[] = catalogue.flags;

const byOption = new Map<string, CatalogueFlag>();
const byDest = new Map<string, CatalogueFlag>();
for (const flag of SGLANG_FLAGS) {
  for (const option of [flag.name, ...flag.aliases]) byOption.set(option, flag);
  // argparse gives a dest the default of the first action that names it.
  if (!byDest.has(flag.dest)) byDest.set(flag.dest, flag);
}

/** The flag an option string (name or alias, e.g. `--tp-size`, `--no-x`) belongs to. */
export function findFlag(option: string): CatalogueFlag | undefined {
  return byOption.get(option);
}

/** The flag that stores into `dest` (a ServerArgs field, also the key `/server_info` reports). */
export function findFlagByDest(dest: string): CatalogueFlag | undefined {
  return byDest.get(dest);
}

/** Every option string, for argparse's prefix matching. */
export function listOptionStrings(): string[] {
  return [...byOption.keys()];
}

/** A flag's choices as a non-empty string list (for z.enum); throws when the flag has none. */
export function choicesOf(name: string): readonly [string, ...string[]] {
  const choices = findFlag(name)?.choices?.map(String);
  if (!choices || choices.length === 0) throw new Error(`${name} has no choices in SGLang ${SGLANG_VERSION}`);
  return choices as [string, ...string[]];
}
