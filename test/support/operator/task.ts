// Test builders for Task objects (used by the unit tests beside this file).
import { API_VERSION, TaskResource } from '#api/resources.ts';
import type { TaskStatus } from '#api/task.ts';
import type { OpenRouterIdentity } from '../../../operator/src/controllers/task/attempt/fingerprint.ts';

/** The identity of examples/task-openrouter.yaml's target. */
export const OPENROUTER_IDENTITY: OpenRouterIdentity = {
  provider: 'openrouter',
  baseUrl: 'https://openrouter.ai/api/v1',
  model: 'openai/gpt-4.1-mini',
  upstreamProvider: 'openai',
  cacheWriteUsage: 'not_applicable',
  inputTokenUpperBound: 2048,
};

export interface TaskOverrides {
  name?: string;
  uid?: string;
  created?: string;
  spec?: Record<string, unknown>;
  status?: TaskStatus;
}

/** A parsed Task (defaults applied), an SGLang target unless the spec says otherwise. */
export function buildTask(o: TaskOverrides = {}): TaskResource {
  const name = o.name ?? 't1';
  const raw: Record<string, unknown> = {
    apiVersion: API_VERSION,
    kind: 'Task',
    metadata: {
      name,
      namespace: 'ns',
      uid: o.uid ?? `uid-${name}`,
      generation: 1,
      creationTimestamp: o.created ?? '2026-01-01T00:00:00Z',
    },
    spec: {
      target: { deployment: { name: 'llama' } },
      input: { prompt: 'Say hi.' },
      maxOutputTokens: 16,
      budget: { maxInputTokens: 100 },
      ...o.spec,
    },
  };
  if (o.status) raw['status'] = o.status;
  return TaskResource.parse(raw);
}
