// Builders of Task manifests (and the Secret an OpenRouter Task names) for
// tests: the samples in examples/ with the changes a test needs.
import { loadSample, type Manifest } from './samples.ts';

export interface SglangTaskOverrides {
  name: string;
  deployment: string;
  prompt: string;
  maxOutputTokens?: number;
  /** Merged over the sample's spec (checks and review are dropped unless given). */
  spec?: Record<string, unknown>;
}

export function buildSglangTaskManifest(o: SglangTaskOverrides): Manifest {
  const m = loadSample('task-sglang.yaml');
  m.metadata.name = o.name;
  const max = o.maxOutputTokens ?? 8;
  m.spec['target'] = { deployment: { name: o.deployment } };
  m.spec['input'] = { prompt: o.prompt };
  m.spec['maxOutputTokens'] = max;
  m.spec['budget'] = { maxInputTokens: 4096, maxOutputTokens: max };
  delete m.spec['checks'];
  delete m.spec['review'];
  Object.assign(m.spec, o.spec ?? {});
  return m;
}

export interface OpenRouterTaskOverrides {
  name: string;
  prompt: string;
  secret: { name: string; key: string };
  cacheWriteUsage?: 'required' | 'not_applicable';
  spec?: Record<string, unknown>;
}

export function buildOpenRouterTaskManifest(o: OpenRouterTaskOverrides): Manifest {
  const m = loadSample('task-openrouter.yaml');
  m.metadata.name = o.name;
  const target = (m.spec['target'] as { openrouter: Record<string, unknown> }).openrouter;
  target['apiKeySecretRef'] = o.secret;
  if (o.cacheWriteUsage) target['cacheWriteUsage'] = o.cacheWriteUsage;
  m.spec['input'] = { prompt: o.prompt };
  delete m.spec['checks'];
  Object.assign(m.spec, o.spec ?? {});
  return m;
}

export function buildSecretManifest(name: string, data: Record<string, string>): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name }, type: 'Opaque', stringData: data };
}
