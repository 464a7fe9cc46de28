// SHA-256 (FIPS 180-4) over a message of 32-bit words, in JavaScript: for
// hashing many short messages (a KV page is the prior digest's 8 words and
// its token ids, 96 bytes at page size 16) without a call into node:crypto a
// page, whose fixed cost is several times the two compression rounds such a
// message needs. Equal to node:crypto's SHA-256 over the same bytes (the
// words big-endian): kv-event-hash.test.ts compares them.
//
// No allocation per message: the schedule and the state are module scratch,
// read back by the caller before the next call.

const K = Int32Array.from(
  [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ],
  (k) => k | 0,
);
const INITIAL = Int32Array.from(
  [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19],
  (h) => h | 0,
);

const schedule = new Int32Array(64);
/** The digest of the last sha256Words call, as 8 big-endian words. */
export const digestWords = new Int32Array(8);
let block = new Int32Array(64);

/** SHA-256 of `words[0, count)` (each word's 4 bytes big-endian) into digestWords. */
export function sha256Words(words: Int32Array, count: number): void {
  // Padding: a 1 bit, zeros, the length in bits in the last two words of the last block.
  const blocks = Math.ceil((count + 3) / 16);
  if (block.length < blocks * 16) block = new Int32Array(blocks * 16);
  for (let i = 0; i < count; i++) block[i] = words[i] ?? 0;
  for (let i = count; i < blocks * 16; i++) block[i] = 0;
  block[count] = 0x80000000 | 0;
  block[blocks * 16 - 1] = count * 32;
  digestWords.set(INITIAL);
  for (let b = 0; b < blocks; b++) compress(block, b * 16);
}

function compress(m: Int32Array, at: number): void {
  const w = schedule;
  for (let i = 0; i < 16; i++) w[i] = m[at + i] ?? 0;
  for (let i = 16; i < 64; i++) {
    const x = w[i - 15] ?? 0;
    const y = w[i - 2] ?? 0;
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    w[i] = ((w[i - 16] ?? 0) + s0 + (w[i - 7] ?? 0) + s1) | 0;
  }
  runRounds();
  for (let i = 0; i < 8; i++) digestWords[i] = (digestWords[i] ?? 0) + (working[i] ?? 0);
}

/** The working variables after the 64 rounds over `schedule`, from digestWords. */
const working = new Int32Array(8);

function runRounds(): void {
  const h = digestWords;
  const w = schedule;
  let a = h[0] ?? 0;
  let b = h[1] ?? 0;
  let c = h[2] ?? 0;
  let d = h[3] ?? 0;
  let e = h[4] ?? 0;
  let f = h[5] ?? 0;
  let g = h[6] ?? 0;
  let k = h[7] ?? 0;
  for (let i = 0; i < 64; i++) {
    const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (k + s1 + ch + (K[i] ?? 0) + (w[i] ?? 0)) | 0;
    const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const t2 = (s0 + maj) | 0;
    k = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  working[0] = a;
  working[1] = b;
  working[2] = c;
  working[3] = d;
  working[4] = e;
  working[5] = f;
  working[6] = g;
  working[7] = k;
}
