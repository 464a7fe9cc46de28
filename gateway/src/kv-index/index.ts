export {
  DEFAULT_MAX_BLOCKS,
  KvBlockIndex,
  type ApplyStats,
  type BlockEntry,
  type KvBlockIndexOptions,
  type PagesByMedium,
  type PrefixMatch,
} from './block-index.ts';
export { decodeEventBatch, type DecodeIssue, type DecodeResult, type KvEventBatch } from './decode.ts';
export { KvEventFeed, type FeedCounters, type FeedState, type LiveStep, type ReplayOutcome } from './feed.ts';
export { computeRequestBlockHashes } from './request-hashes.ts';
export {
  KvEventSubscriber,
  KvIndexState,
  type KvEventSubscriberOptions,
  type KvIndexStatus,
} from './subscriber.ts';
