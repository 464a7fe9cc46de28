// The shared model cache of a download source (ADR 0016): one PersistentVolumeClaim per
// namespace and pair of digests, filled once by one Job. Names come from the digests, so every
// Deployment that pins the same files finds the same cache without any lookup.
import { createHash } from 'node:crypto';
import type { DeploymentSpec, ModelDownload, ModelObjectStore } from '#api';

/** Where model files are mounted in every SGLang container, whatever their source. */
export const MODEL_DIR = '/models';
export const LABEL_MODEL_CACHE = 'cacheroute.dev/model-cache';
/** The fetch Job's pods: what a test harness's node agent recognises them by, too. */
export const FETCH_COMPONENT = 'model-fetch';
export const ANNOTATION_MODEL_DIGEST = 'cacheroute.dev/model-digest';
export const ANNOTATION_TOKENIZER_DIGEST = 'cacheroute.dev/tokenizer-digest';
export const ANNOTATION_MODEL_SOURCE = 'cacheroute.dev/model-source';
/** Set on the cache by the operator once a fetch verified it: the record a restart reads. */
export const ANNOTATION_VERIFIED = 'cacheroute.dev/model-verified';
export const FETCH_CONTAINER = 'fetch';
/** On a pvc source's verify Job: the Deployment it verifies for (its controller). */
export const LABEL_VERIFY_FOR = 'cacheroute.dev/model-verify-for';
export const KEY_LENGTH = 20;

/**
 * The tokenizer's directory inside the fetched repository: model.tokenizerPath under the model
 * mount, relative; undefined when the tokenizer is the model directory's top. A tokenizer path
 * outside the mount is not in the repository the Job fetches: `outside`.
 */
export function computeTokenizerSubpath(
  spec: DeploymentSpec,
): { ok: true; subpath: string | undefined } | { ok: false; path: string } {
  const path = spec.model.tokenizerPath?.replace(/\/+$/, '');
  if (path === undefined || path === MODEL_DIR) return { ok: true, subpath: undefined };
  if (path.startsWith(`${MODEL_DIR}/`)) return { ok: true, subpath: path.slice(MODEL_DIR.length + 1) };
  return { ok: false, path };
}

/**
 * A source the operator fetches into a model cache (a hub commit, an object store's prefix), with
 * the settings both have (cache, storageClassName, sizeLimit, proxy); undefined for staged files.
 */
export function fetchedSourceOf(spec: DeploymentSpec): ModelDownload | ModelObjectStore | undefined {
  return spec.model.source.download ?? spec.model.source.objectStore;
}

/** Where a fetched source's files come from, in words and annotations: `repo@commit` or the s3:// URL. */
export function describeFetchedSource(spec: DeploymentSpec): string {
  const store = spec.model.source.objectStore;
  return store ? store.url : `${spec.model.path}@${spec.model.revision ?? ''}`;
}

/** What identifies a cache's content: both digests and where the tokenizer digest was taken. */
export function computeModelCacheKey(spec: DeploymentSpec): string {
  const t = computeTokenizerSubpath(spec);
  const material = [spec.model.digest, spec.model.tokenizerDigest, t.ok ? (t.subpath ?? '') : t.path];
  return createHash('sha256').update(material.join('\n')).digest('hex').slice(0, KEY_LENGTH);
}

export const buildModelCacheName = (key: string): string => `model-${key}`;
export const buildFetchJobName = (key: string): string => `model-fetch-${key}`;

/**
 * What a staged source's verification is of: both digests, the tokenizer's place, and where the
 * files are (a pvc's claim and subPath, a hostPath's path).
 */
export function computeStagedKey(spec: DeploymentSpec): string {
  const t = computeTokenizerSubpath(spec);
  const { pvc, hostPath } = spec.model.source;
  const material = [
    spec.model.digest,
    spec.model.tokenizerDigest,
    t.ok ? (t.subpath ?? '') : t.path,
    pvc?.claimName ?? '',
    pvc?.subPath ?? '',
    ...(hostPath ? [`hostPath:${hostPath.path}`] : []),
  ];
  return createHash('sha256')
    .update(`staged\n${material.join('\n')}`)
    .digest('hex')
    .slice(0, KEY_LENGTH);
}

/** A Deployment's verify Job for one staged key: its own (the files may be re-staged under it). */
export const buildVerifyJobName = (deployment: string, key: string): string =>
  `model-verify-${createHash('sha256').update(`${deployment}\n${key}`).digest('hex').slice(0, KEY_LENGTH)}`;
