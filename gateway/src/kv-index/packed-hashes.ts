// A request's block hashes as the KV index reads them: SGLang's signed int64s
// packed as int32 halves, [high 0, low 0, high 1, low 1, ...] (block-table.ts,
// ADR 0045), and the conversions from and to the bigints events carry.

/** Block hashes packed as int32 halves; page i is halves[2i] (high) and halves[2i + 1] (low). */
export class PackedBlockHashes {
  readonly halves: Int32Array;

  constructor(halves: Int32Array) {
    if (halves.length % 2 !== 0) throw new RangeError('packed block hashes come in pairs of halves');
    this.halves = halves;
  }

  static from(hashes: readonly bigint[]): PackedBlockHashes {
    const halves = new Int32Array(hashes.length * 2);
    for (let i = 0; i < hashes.length; i++) {
      splitBlockHash(hashes[i] as bigint);
      halves[2 * i] = splitHi();
      halves[2 * i + 1] = splitLo();
    }
    return new PackedBlockHashes(halves);
  }

  /** Pages. */
  get length(): number {
    return this.halves.length / 2;
  }

  at(i: number): bigint {
    return joinBlockHash(this.halves[2 * i] ?? 0, this.halves[2 * i + 1] ?? 0);
  }

  toBigInts(): bigint[] {
    return Array.from({ length: this.length }, (_, i) => this.at(i));
  }
}

// One int64 seen as two int32s: no bigint arithmetic (each >> or asIntN would allocate one).
const wide = new BigInt64Array(1);
const narrow = new Int32Array(wide.buffer);
const LITTLE_ENDIAN = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;
const HI = LITTLE_ENDIAN ? 1 : 0;
const LO = LITTLE_ENDIAN ? 0 : 1;

/** Splits `hash` (a signed int64) for splitHi() and splitLo() to read. */
export function splitBlockHash(hash: bigint): void {
  wide[0] = hash;
}

/** The high int32 of the hash splitBlockHash took last. */
export function splitHi(): number {
  return narrow[HI] ?? 0;
}

/** Its low 32 bits, as an int32. */
export function splitLo(): number {
  return narrow[LO] ?? 0;
}

/** The signed int64 of (hi, lo). */
export function joinBlockHash(hi: number, lo: number): bigint {
  narrow[HI] = hi;
  narrow[LO] = lo;
  return wide[0] ?? 0n;
}
