// Pure decisions for server-side apply: would applying `desired` change anything, and
// may we apply it at all (adoption)?
//
// "No change" needs two things, both read from the live object:
//  1. every field we set has the live value, and
//  2. the fields our manager owns (its managedFields entry) are exactly the fields we
//     set now — a field we owned and no longer set would be removed by the apply, and a
//     field another manager took from us (drift by `kubectl edit`) is no longer ours.
// Walking `desired` alongside the manager's fieldsV1 resolves associative lists by
// their `k:{...}` keys, sets by `v:...`, and treats lists and maps without children
// as atomic. When the answer is not certain (for example a quantity the server
// normalised), the shell asks the API server with a dry-run instead of writing.
import { deepEqual, isPlainObject } from './equal.ts';
import { controllerOf, controllerReference } from '#kube/objects.ts';
import type { FieldsV1, KubeObject, OwnerReference } from '#kube/objects.ts';

export type IntentCheck = { same: true } | { same: false; reason: string };

const SAME: IntentCheck = { same: true };
const differ = (reason: string): IntentCheck => ({ same: false, reason });

// Keys of the root and of metadata that field management does not track.
const UNTRACKED_ROOT = new Set(['apiVersion', 'kind', 'status']);
const UNTRACKED_META = new Set([
  'name',
  'namespace',
  'uid',
  'resourceVersion',
  'generation',
  'managedFields',
]);

export function compareAppliedIntent(
  desired: KubeObject,
  live: KubeObject | undefined,
  fieldManager: string,
): IntentCheck {
  if (!live) return differ('object does not exist');
  const entry = live.metadata?.managedFields?.find(
    (m) => m.manager === fieldManager && m.operation === 'Apply' && !m.subresource,
  );
  if (!entry?.fieldsV1) return differ(`no fields owned by ${fieldManager}`);
  const owned = entry.fieldsV1;
  const root: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(desired)) if (!UNTRACKED_ROOT.has(k)) root[k] = v;
  const meta: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(desired.metadata ?? {})) if (!UNTRACKED_META.has(k)) meta[k] = v;
  if (Object.keys(meta).length > 0) root['metadata'] = meta;
  else delete root['metadata'];
  return walk(root, live, owned, '');
}

function walk(d: unknown, l: unknown, owned: FieldsV1 | undefined, path: string): IntentCheck {
  if (owned === undefined) return differ(`${path || '.'}: not owned`);
  const children = Object.keys(owned).filter((k) => k !== '.');
  if (isPlainObject(d)) {
    if (!isPlainObject(l)) return differ(`${path}: missing`);
    // A map owned without children is atomic (e.g. a LabelSelector).
    if (children.length === 0) return deepEqual(d, l) ? SAME : differ(`${path}: differs`);
    for (const [k, v] of Object.entries(d)) {
      if (v === undefined) continue;
      const r = walk(v, l[k], owned[`f:${k}`], `${path}.${k}`);
      if (!r.same) return r;
    }
    for (const k of children) {
      if (!k.startsWith('f:') || d[k.slice(2)] === undefined)
        return differ(`${path}: owns ${k}, no longer set`);
    }
    return SAME;
  }
  if (Array.isArray(d)) return walkList(d, l, owned, children, path);
  return deepEqual(d, l) ? SAME : differ(`${path}: differs`);
}

function walkList(d: unknown[], l: unknown, owned: FieldsV1, children: string[], path: string): IntentCheck {
  const live: readonly unknown[] = Array.isArray(l) ? (l as unknown[]) : [];
  if (children.length === 0 || children.some((c) => c.startsWith('i:'))) {
    // Atomic list: the whole value is ours. An empty list may be dropped by the server.
    return deepEqual(d, l) || (d.length === 0 && l === undefined) ? SAME : differ(`${path}: differs`);
  }
  if (children.length !== d.length)
    return differ(`${path}: owns ${children.length} elements, sets ${d.length}`);
  for (const [i, el] of d.entries()) {
    if (isPlainObject(el)) {
      const child = children.find((c) => c.startsWith('k:') && keyMatches(c, el));
      if (!child) return differ(`${path}[${i}]: element not owned`);
      const liveEl = live.find((x) => isPlainObject(x) && keyMatches(child, x));
      const r = walk(el, liveEl, owned[child], `${path}[${i}]`);
      if (!r.same) return r;
    } else {
      if (owned[`v:${JSON.stringify(el)}`] === undefined) return differ(`${path}[${i}]: value not owned`);
      if (!live.some((x) => deepEqual(x, el))) return differ(`${path}[${i}]: value missing`);
    }
  }
  return SAME;
}

function keyMatches(child: string, el: Record<string, unknown>): boolean {
  let key: unknown;
  try {
    key = JSON.parse(child.slice(2));
  } catch {
    return false;
  }
  return isPlainObject(key) && Object.entries(key).every(([k, v]) => deepEqual(el[k], v));
}

// Objects equal apart from bookkeeping the server updates on every write.
export function isSameObject(a: KubeObject, b: KubeObject): boolean {
  return deepEqual(stripBookkeeping(a), stripBookkeeping(b));
}

function stripBookkeeping(o: KubeObject): KubeObject {
  const meta = { ...o.metadata };
  delete meta.resourceVersion;
  if (meta.managedFields) meta.managedFields = meta.managedFields.map(({ time: _time, ...rest }) => rest);
  return { ...o, metadata: meta };
}

export type AdoptionCheck =
  { ok: true } | { ok: false; controller: Pick<OwnerReference, 'apiVersion' | 'kind' | 'name' | 'uid'> };

// We never take over an object another controller controls: two controllers fighting
// over one object flap it forever. An object without a controller may be adopted.
export function planAdoption(live: KubeObject | undefined, ownerUid: string | undefined): AdoptionCheck {
  const ctl = live ? controllerOf(live) : undefined;
  if (!ctl || ctl.uid === ownerUid) return { ok: true };
  return {
    ok: false,
    controller: { apiVersion: ctl.apiVersion, kind: ctl.kind, name: ctl.name, uid: ctl.uid },
  };
}

// A copy of obj with owner as its controller (other owner references kept).
export function setControllerReference<T extends KubeObject>(owner: KubeObject, obj: T): T {
  const { apiVersion, kind } = owner;
  if (!apiVersion || !kind || !owner.metadata?.name || !owner.metadata.uid) {
    throw new Error('owner needs apiVersion, kind, metadata.name and metadata.uid');
  }
  const ref = controllerReference({ ...owner, apiVersion, kind });
  const others = (obj.metadata?.ownerReferences ?? []).filter((r) => r.uid !== ref.uid);
  return { ...obj, metadata: { ...obj.metadata, ownerReferences: [...others, ref] } };
}
