export { computeBlockKeys, computeTextTokens, type BlockKey } from './blocks.ts';
export { PrefixTree, type EndpointId, type PrefixKey, type PrefixMatch } from './tree.ts';
