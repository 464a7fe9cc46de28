// KWOK's stage files, as the control plane passes them, with one change: the pods of the
// model fetch Job (label app.kubernetes.io/component=model-fetch) are left out of the
// pod-complete stage, which would otherwise mark every Running Job pod Succeeded at once. Those
// pods are run for real by the fetch runner (fetch-runner.ts), which reports how they ended.
// And a pod with readiness gates is not made Ready by the pod-ready stage, nor its gates True:
// whoever owns a gate sets it (the operator, cacheroute.dev/verified), and the sim-kubelet
// makes the pod Ready once all are True, as a kubelet does (kubelet-readiness.ts).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FETCH_COMPONENT } from '../../operator/src/controllers/deployment/model-cache/names.ts';

export const RUNNER_LABEL = { key: 'app.kubernetes.io/component', value: FETCH_COMPONENT } as const;

const JOB_OWNER_EXPRESSION = `    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values:
      - 'Job'
`;

/** The stages text with the pod-complete stage refusing the fetch Job's pods. */
export function buildStagesWithoutRunnerPods(stages: string): string {
  const docs = stages.split(/^---$/m);
  const at = docs.findIndex((d) => /^\s*name: pod-complete$/m.test(d));
  const doc = docs[at];
  if (at < 0 || doc === undefined || !doc.includes(JOB_OWNER_EXPRESSION))
    throw new Error("KWOK's pod-complete stage is not the one this harness knows: update kwok-stages.ts");
  docs[at] = doc.replace(
    JOB_OWNER_EXPRESSION,
    `${JOB_OWNER_EXPRESSION}    - key: '.metadata.labels["${RUNNER_LABEL.key}"]'
      operator: 'NotIn'
      values:
      - '${RUNNER_LABEL.value}'
`,
  );
  return docs.join('---');
}

const READY_TRUE = `      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
`;
const GATES_TRUE = `      {{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}
`;

/** The stages text with the pod-ready stage leaving a gated pod not Ready and its gates unset. */
export function buildStagesWithReadinessGates(stages: string): string {
  const docs = stages.split(/^---$/m);
  const at = docs.findIndex((d) => /^\s*name: pod-ready$/m.test(d));
  const doc = docs[at];
  if (at < 0 || doc === undefined || !doc.includes(READY_TRUE) || !doc.includes(GATES_TRUE))
    throw new Error("KWOK's pod-ready stage is not the one this harness knows: update kwok-stages.ts");
  docs[at] = doc
    .replace(
      READY_TRUE,
      READY_TRUE.replace(
        'status: "True"',
        'status: {{ if .spec.readinessGates }}"False"{{ else }}"True"{{ end }}',
      ),
    )
    .replace(GATES_TRUE, '');
  return docs.join('---');
}

/** Writes the changed stages into `dir` and returns the file. */
export function writeKwokStages(source: string, dir: string): string {
  const path = join(dir, 'kwok-stages.yaml');
  writeFileSync(
    path,
    buildStagesWithReadinessGates(buildStagesWithoutRunnerPods(readFileSync(source, 'utf8'))),
  );
  return path;
}
