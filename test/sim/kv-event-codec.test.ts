import { describe, expect, it } from 'vitest';
import { buildFrames, encodeEventBatch, encodeLoadStat } from './kv-event-codec.ts';

// Bytes msgspec 0.5.23's encoder produced for the same values
// (msgspec.msgpack.Encoder().encode(KVEventBatch(...)) / LoadStat(...) in the pinned venv).
const BATCH_HEX =
  '93cb41d9d2ded00000009487a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657396d3cf97adeedb59e05bcf4ebfa8a1f3c3415107fbcf0000000100000000d3ffffffff7fffffffb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da347505588a474797065ab426c6f636b53746f726564ac626c6f636b5f6861736865739101b1706172656e745f626c6f636b5f68617368f9a9746f6b656e5f69647391cd012caa626c6f636b5f73697a6501a76c6f72615f6964c0a66d656469756daa4350555f50494e4e4544aa63616368655f73616c74a17383a474797065ac426c6f636b52656d6f766564ac626c6f636b5f6861736865739109a66d656469756da347505581a474797065b0416c6c426c6f636b73436c656172656400';
const LOAD_HEX = '9ba84c6f6164537461740100cd012ccd20000000cd012ccd0100ce00011170cf000000012a05f200';

describe('KV event codec (msgspec layout)', () => {
  it('encodes an event batch byte for byte as msgspec does: float64 ts, tagged maps, omitted None fields', () => {
    const bytes = encodeEventBatch(
      1733000000, // integral: still a float64, as Python's float is
      [
        {
          type: 'BlockStored',
          blockHashes: [-3488128144981237669n, 5674439469042975057n, 7n, -5n, 2n ** 32n, -(2n ** 31n) - 1n],
          parentBlockHash: null,
          tokenIds: [1, 2, 3, 4],
          blockSize: 4,
          loraId: null,
          medium: 'GPU',
          cacheSalt: null,
        },
        {
          type: 'BlockStored',
          blockHashes: [1n],
          parentBlockHash: -7n,
          tokenIds: [300],
          blockSize: 1,
          loraId: null,
          medium: 'CPU_PINNED',
          cacheSalt: 's',
        },
        { type: 'BlockRemoved', blockHashes: [9n], medium: 'GPU' },
        { type: 'AllBlocksCleared' },
      ],
      0,
    );
    expect(bytes.toString('hex')).toBe(BATCH_HEX);
  });

  it('encodes LoadStat as msgspec does (tag first, every field, 64-bit only when needed)', () => {
    const bytes = encodeLoadStat({
      numRunningReqs: 1,
      numWaitingReqs: 0,
      numTokens: 300,
      maxTotalNumTokens: 8192,
      attnDpRank: 0,
      numWaitingUncachedTokens: 0,
      numTotalTokens: 300,
      maxRunningRequests: 256,
      totalPrefillUncachedTokens: 70000,
      totalPrefillBusyUs: 5_000_000_000,
    });
    expect(bytes.toString('hex')).toBe(LOAD_HEX);
  });

  it('frames a message as topic, 8-byte big-endian sequence, payload', () => {
    const [topic, seq, payload] = buildFrames('kv', 258, Buffer.from([0x90]));
    expect(topic.toString()).toBe('kv');
    expect(seq.toString('hex')).toBe('0000000000000102');
    expect(payload.toString('hex')).toBe('90');
  });
});
