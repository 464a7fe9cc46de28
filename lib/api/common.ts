import { z } from 'zod';

/** Kubernetes quantity (e.g. `16Gi`, `500m`), validated as the API server would. */
export const Quantity = z
  .union([
    z.number().int().min(0),
    z
      .string()
      .max(64)
      .regex(
        /^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$/,
      ),
  ])
  .meta({ 'x-kubernetes-int-or-string': true });

/** RFC 1123 label: lower case alphanumerics and '-', at most 63 characters. */
export const DnsLabel = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);

/** RFC 1123 subdomain, as object names are. */
export const ObjectName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);

export const Sha256Digest = z
  .string()
  .regex(/^sha256:[a-f0-9]{64}$/)
  .meta({ description: 'A content digest: `sha256:` followed by 64 lower-case hex digits.' });

export const LocalObjectReference = z.object({
  name: ObjectName.meta({ description: 'Name of the object in the same namespace.' }),
});

export const SecretKeySelector = z.object({
  name: ObjectName.meta({ description: 'Name of the Secret in the same namespace.' }),
  key: z.string().min(1).max(253).meta({ description: 'Key within the Secret.' }),
});

export const ConfigMapKeySelector = z.object({
  name: ObjectName.meta({ description: 'Name of the ConfigMap in the same namespace.' }),
  key: z.string().min(1).max(253).meta({ description: 'Key within the ConfigMap.' }),
});

export const ConditionStatus = z.enum(['True', 'False', 'Unknown']);

/** The shape of metav1.Condition. */
export const Condition = z.object({
  type: z.string().min(1).max(316),
  status: ConditionStatus,
  observedGeneration: z.number().int().min(0).optional(),
  lastTransitionTime: z.string().meta({ format: 'date-time' }),
  reason: z.string().min(1).max(1024),
  message: z.string().max(32768),
});
export type Condition = z.infer<typeof Condition>;

export const Conditions = z
  .array(Condition)
  .max(16)
  .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] });

/** A toleration, as core/v1 defines it. */
export const Toleration = z.object({
  key: z.string().max(316).optional(),
  operator: z.enum(['Exists', 'Equal']).optional(),
  value: z.string().max(63).optional(),
  effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
  tolerationSeconds: z.number().int().optional(),
});

/** Passed through to the pod unchanged; the API server validates it on the pod. */
export const Affinity = z.record(z.string(), z.unknown()).meta({
  'x-kubernetes-preserve-unknown-fields': true,
  description: 'core/v1 Affinity, passed to the pods unchanged.',
});

export const EnvVar = z.object({
  name: z
    .string()
    .min(1)
    .max(253)
    .regex(/^[-._a-zA-Z][-._a-zA-Z0-9]*$/),
  value: z.string().max(32768),
});
