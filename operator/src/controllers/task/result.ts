// Where a result lives: inline in status up to INLINE_RESULT_MAX_BYTES, else
// in a ConfigMap owned by the Task (garbage-collected with it; no finalizer).
// status.result.sha256 always covers the full text, wherever it lives.
import { API_VERSION, type TaskResource } from '#api/resources.ts';
import { buildOwnedConfigMap, type DataObject } from '#kube/objects.ts';
import type { TaskStatus } from '#api/task.ts';
import { computeSha256 } from './attempt/fingerprint.ts';
import { TaskReason } from './attempt/reasons.ts';
import { err, ok, type AttemptError, type Result } from './attempt/types.ts';

export const INLINE_RESULT_MAX_BYTES = 16 * 1024;
/** A ConfigMap holds at most 1 MiB in all; leave room for metadata. */
export const CONFIGMAP_RESULT_MAX_BYTES = 1024 * 1024 - 4096;
export const RESULT_KEY = 'result';
export const LABEL_TASK = 'cacheroute.dev/task';

export type TaskResult = NonNullable<TaskStatus['result']>;

export function computeResultSha256(text: string): string {
  return computeSha256(text);
}

/** `<task>-result`, shortened with a hash when the task name is long. */
export function buildResultConfigMapName(taskName: string): string {
  const name = `${taskName}-result`;
  if (name.length <= 253) return name;
  return `${taskName.slice(0, 253 - 24).replace(/[-.]+$/, '')}-${computeSha256(taskName).slice(7, 23)}`;
}

export function buildResultConfigMap(task: TaskResource, text: string): DataObject {
  const name = task.metadata.name ?? '';
  const owner = { ...task, apiVersion: API_VERSION, kind: 'Task' };
  return buildOwnedConfigMap(
    owner,
    buildResultConfigMapName(name),
    { [LABEL_TASK]: name },
    {
      [RESULT_KEY]: text,
    },
  );
}

export interface StoredResult {
  result: TaskResult;
  /** To apply (server-side, our field manager) before the status that references it is written. */
  configMap?: DataObject;
}

export function buildResultStorage(task: TaskResource, text: string): Result<StoredResult, AttemptError> {
  const bytes = Buffer.byteLength(text, 'utf8');
  const sha256 = computeResultSha256(text);
  if (bytes <= INLINE_RESULT_MAX_BYTES) return ok({ result: { inline: text, sha256, bytes } });
  if (bytes > CONFIGMAP_RESULT_MAX_BYTES)
    return err({
      reason: TaskReason.ResultUnavailable,
      code: 'ResultTooLarge',
      message: `result of ${bytes} bytes does not fit a ConfigMap`,
    });
  if (!task.metadata.uid)
    return err({
      reason: TaskReason.ResultUnavailable,
      code: 'NoOwnerUid',
      message: 'the Task has no uid to own its result',
    });
  const configMap = buildResultConfigMap(task, text);
  return ok({
    result: { configMapRef: { name: configMap.metadata?.name ?? '', key: RESULT_KEY }, sha256, bytes },
    configMap,
  });
}

/**
 * The result text: inline, or `configMapText` the shell read from the
 * referenced ConfigMap. A text whose hash is not the recorded one is refused.
 */
export function computeResultText(
  result: TaskResult | undefined,
  configMapText?: string,
): Result<string, AttemptError> {
  const text = result?.inline ?? (result?.configMapRef ? configMapText : undefined);
  if (text === undefined)
    return err({
      reason: TaskReason.ResultUnavailable,
      code: 'ResultMissing',
      message: 'the result text could not be read',
    });
  if (result?.sha256 !== undefined && computeResultSha256(text) !== result.sha256)
    return err({
      reason: TaskReason.ResultUnavailable,
      code: 'ResultDigestMismatch',
      message: 'the stored result does not match its sha256',
    });
  return ok(text);
}
