import { GROUP, VERSION } from './resources.ts';
import type { KindDefinition } from './kinds.ts';
import { toOpenApi, type SchemaNode } from './openapi.ts';

export const CATEGORY = 'cacheroute';

/** Builds the CustomResourceDefinition of one kind: pure, deterministic output. */
export function buildCrd(def: KindDefinition): SchemaNode {
  const spec = toOpenApi(def.spec);
  const status = toOpenApi(def.status);
  status['description'] ??= `Observed state of the ${def.kind}, written by the operator.`;
  spec['description'] ??= `Desired state of the ${def.kind}.`;
  const root: SchemaNode = {
    type: 'object',
    description: def.description,
    required: ['spec'],
    properties: {
      apiVersion: {
        type: 'string',
        description: 'APIVersion defines the versioned schema of this representation of an object.',
      },
      kind: {
        type: 'string',
        description: 'Kind is a string value representing the REST resource this object represents.',
      },
      metadata: { type: 'object' },
      spec,
      status,
    },
  };
  if (def.rootValidations.length > 0) root['x-kubernetes-validations'] = def.rootValidations;
  const subresources: SchemaNode = { status: {} };
  if (def.scale) subresources['scale'] = { ...def.scale };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${def.plural}.${GROUP}`,
      labels: { 'app.kubernetes.io/part-of': 'cacheroute' },
    },
    spec: {
      group: GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        shortNames: def.shortNames,
        categories: [CATEGORY],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: root },
          subresources,
          additionalPrinterColumns: def.printerColumns,
        },
      ],
    },
  };
}
