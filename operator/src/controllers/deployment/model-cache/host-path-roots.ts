// Which node directories a Deployment's `hostPath` model source may name (issue 30): the operator
// mounts it into pods it makes on the user's behalf, with the user's image, so an unchecked path
// would let anyone who may create Deployments (and not pods) mount any directory of any node,
// `/` of a control-plane node included. Only paths under the operator's --host-path-roots are
// admitted (default: the node model cache root). Under the node cache root, the caches' own
// entries (a directory per cache key, the verification records) stay the operator's: a source
// naming the root itself or one of them would read another namespace's fetched model.
import { posix } from 'node:path';
import { KEY_LENGTH } from './names.ts';

export const HOST_PATH_NOT_ALLOWED = 'HostPathNotAllowed';
export const HOST_PATH_ROOTS_FLAG = '--host-path-roots';

const CACHE_ENTRY = new RegExp(`^([0-9a-f]{${KEY_LENGTH}}|verified)$`);

const trimSlashes = (path: string): string => (path === '/' ? path : path.replace(/\/+$/, ''));

/** Whether `path` is `root` or under it (segment by segment: /models2 is not under /models). */
function isWithin(path: string, root: string): boolean {
  return root === '/' || path === root || path.startsWith(`${root}/`);
}

export type HostPathVerdict = { ok: true } | { ok: false; message: string };

/** Whether a hostPath source's `path` is one the operator may mount for it. */
export function checkHostPath(
  path: string,
  roots: readonly string[],
  nodeCacheRoot: string,
): HostPathVerdict {
  const allowed = roots.length > 0 ? roots.join(', ') : 'none';
  const refuse = (why: string): HostPathVerdict => ({
    ok: false,
    message: `model.source.hostPath ${path} ${why}; no pod is made for it (the operator's ${HOST_PATH_ROOTS_FLAG}: ${allowed})`,
  });
  // No `.`/`..` or doubled slashes: the path is compared as written, so it must be written plainly.
  const plain = trimSlashes(path);
  if (posix.normalize(plain) !== plain || plain.split('/').some((s) => s === '..' || s === '.'))
    return refuse('is not a plain absolute path (no ".", ".." or "//")');
  if (!roots.some((r) => isWithin(plain, trimSlashes(r))))
    return refuse('is outside the directories the operator may mount');
  const cacheRoot = trimSlashes(nodeCacheRoot);
  if (isWithin(plain, cacheRoot)) {
    const first = plain.slice(cacheRoot.length + 1).split('/')[0] ?? '';
    if (plain === cacheRoot || CACHE_ENTRY.test(first))
      return refuse(
        `is the node model cache (${cacheRoot}) or one of its entries, which are the operator's own`,
      );
  }
  return { ok: true };
}
