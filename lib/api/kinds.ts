import type { z } from 'zod';
import { CachePolicySpec, CachePolicyStatus } from './cache-policy.ts';
import { DeploymentSpec } from './deployment-spec.ts';
import { DeploymentStatus } from './deployment-status.ts';
import { DeploymentPartSpec, DeploymentPartStatus } from './deployment-part.ts';
import { QualificationSpec, QualificationStatus } from './qualification.ts';
import { taskFrozenSpecRule } from './resources.ts';
import { toCel, type CelValidation } from './rules.ts';
import { TaskSpec, TaskStatus } from './task.ts';
import { TenantSpec, TenantStatus } from './tenant.ts';

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  priority?: number;
}

/** Everything the CRD generator needs to know about one kind. */
export interface KindDefinition {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  description: string;
  spec: z.ZodType;
  status: z.ZodType;
  rootValidations: CelValidation[];
  printerColumns: PrinterColumn[];
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath: string };
}

const age: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
const readyCondition: PrinterColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};

export const KINDS: readonly KindDefinition[] = [
  {
    kind: 'Deployment',
    plural: 'deployments',
    singular: 'deployment',
    // Not `deploy`: apps/v1 owns that short name, and hiding it would surprise every user.
    shortNames: ['sgd'],
    description:
      'An identified SGLang deployment with a declared KV-cache profile (dense, HiCache, HiSparse).',
    spec: DeploymentSpec,
    status: DeploymentStatus,
    rootValidations: [],
    printerColumns: [
      { name: 'Deployment-ID', type: 'string', jsonPath: '.spec.deploymentId' },
      { name: 'Profile', type: 'string', jsonPath: '.status.profile' },
      readyCondition,
      { name: 'Replicas', type: 'integer', jsonPath: '.status.replicas', description: 'Pods that exist' },
      { name: 'Serving', type: 'integer', jsonPath: '.status.readyReplicas', description: 'Ready replicas' },
      {
        name: 'Verified',
        type: 'integer',
        jsonPath: '.status.verifiedReplicas',
        description: 'Replicas whose identity is verified',
      },
      { name: 'Routable', type: 'boolean', jsonPath: '.status.routable.value' },
      {
        name: 'Weight',
        type: 'integer',
        jsonPath: '.spec.traffic.weight',
        description: 'Share of the served name',
      },
      {
        name: 'Hit-Rate',
        type: 'number',
        jsonPath: '.status.cache.hitRate',
        description: "The runtimes' prefix cache hit rate over the last window",
      },
      {
        name: 'Cache',
        type: 'string',
        jsonPath: '.status.conditions[?(@.type=="CacheHealthy")].reason',
        description: 'CacheHealthy: why',
        priority: 1,
      },
      { name: 'Model', type: 'string', jsonPath: '.spec.model.servedName', priority: 1 },
      { name: 'Fingerprint', type: 'string', jsonPath: '.status.identity.fingerprint', priority: 1 },
      age,
    ],
    scale: {
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.selector',
    },
  },
  {
    kind: 'DeploymentPart',
    plural: 'deploymentparts',
    singular: 'deploymentpart',
    shortNames: ['sgdpart'],
    description:
      'The prefill or decode part of a disaggregated Deployment as a scale target of its own: made and owned by the operator, scaled by an HPA, KEDA or kubectl scale.',
    spec: DeploymentPartSpec,
    status: DeploymentPartStatus,
    rootValidations: [],
    printerColumns: [
      { name: 'Deployment', type: 'string', jsonPath: '.spec.deployment' },
      { name: 'Part', type: 'string', jsonPath: '.spec.part' },
      { name: 'Desired', type: 'integer', jsonPath: '.spec.replicas', description: 'Replicas to run' },
      { name: 'Current', type: 'integer', jsonPath: '.status.replicas', description: 'Pods that exist' },
      { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas', description: 'Ready pods' },
      age,
    ],
    scale: {
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.selector',
    },
  },
  {
    kind: 'CachePolicy',
    plural: 'cachepolicies',
    singular: 'cachepolicy',
    shortNames: ['cpol'],
    description: 'How a set of Deployments shares cache namespaces, routes and reuses completed work.',
    spec: CachePolicySpec,
    status: CachePolicyStatus,
    rootValidations: [],
    printerColumns: [
      { name: 'Namespace-Key', type: 'string', jsonPath: '.spec.cacheNamespace' },
      { name: 'Routing', type: 'string', jsonPath: '.spec.routing.policy' },
      { name: 'Reuse', type: 'boolean', jsonPath: '.spec.resultReuse.enabled' },
      { name: 'Accepted', type: 'string', jsonPath: '.status.conditions[?(@.type=="Accepted")].status' },
      { name: 'Warmed', type: 'string', jsonPath: '.status.conditions[?(@.type=="Warmed")].status' },
      age,
    ],
  },
  {
    kind: 'Task',
    plural: 'tasks',
    singular: 'task',
    shortNames: ['crtask'],
    description: 'One bounded unit of work with a durable, reusable result.',
    spec: TaskSpec,
    status: TaskStatus,
    rootValidations: [toCel(taskFrozenSpecRule)],
    printerColumns: [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      { name: 'Target', type: 'string', jsonPath: '.spec.target.deployment.name' },
      { name: 'Reused-From', type: 'string', jsonPath: '.status.reusedFrom.name' },
      { name: 'Prompt-Tokens', type: 'integer', jsonPath: '.status.usage.promptTokens' },
      { name: 'Completion-Tokens', type: 'integer', jsonPath: '.status.usage.completionTokens' },
      { name: 'Fingerprint', type: 'string', jsonPath: '.status.fingerprint', priority: 1 },
      age,
    ],
  },
  {
    kind: 'Tenant',
    plural: 'tenants',
    singular: 'tenant',
    shortNames: ['crtenant'],
    description:
      'Who may call the gateway (API keys in a Secret), which models, how often, and with what priority.',
    spec: TenantSpec,
    status: TenantStatus,
    rootValidations: [],
    printerColumns: [
      readyCondition,
      { name: 'Secret', type: 'string', jsonPath: '.spec.apiKeys.secretRef.name' },
      { name: 'Requests/min', type: 'integer', jsonPath: '.spec.limits.requestsPerMinute' },
      { name: 'Tokens/min', type: 'integer', jsonPath: '.spec.limits.tokensPerMinute' },
      { name: 'Priority', type: 'integer', jsonPath: '.spec.priority' },
      age,
    ],
  },
  {
    kind: 'Qualification',
    plural: 'qualifications',
    singular: 'qualification',
    shortNames: ['qual'],
    description:
      'A matched, live comparison of two Deployments that differ only in a declared subject (the cache profile): cold and warm samples, arms alternating, distributions, a verdict and its evidence level.',
    spec: QualificationSpec,
    status: QualificationStatus,
    rootValidations: [],
    printerColumns: [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      { name: 'Arm-1', type: 'string', jsonPath: '.spec.arms[0].deployment.name' },
      { name: 'Arm-2', type: 'string', jsonPath: '.spec.arms[1].deployment.name' },
      { name: 'Progress', type: 'string', jsonPath: '.status.progress', description: 'Samples run of all' },
      { name: 'Evidence', type: 'string', jsonPath: '.status.evidence' },
      { name: 'Faster', type: 'string', jsonPath: '.status.verdict.faster' },
      {
        name: 'Diff-ms',
        type: 'number',
        jsonPath: '.status.verdict.medianDifferenceMs',
        description: 'Median of arm 2 minus arm 1, on the verdict metric',
      },
      { name: 'Metric', type: 'string', jsonPath: '.spec.verdict.metric', priority: 1 },
      {
        name: 'Reason',
        type: 'string',
        jsonPath: '.status.conditions[?(@.type=="Accepted")].reason',
        priority: 1,
      },
      age,
    ],
  },
];
