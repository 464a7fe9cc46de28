// A replica that spans nodes is a LeaderWorkerSet group (sigs.k8s.io/lws, ADR 0018): the LWS
// controller makes a leader pod per group and a StatefulSet of its workers, gives every pod
// its rank and its leader's address (env), and recreates a group as a whole when one of its
// pods fails. The operator renders the set and reads its pods; it keeps no gang logic. Pure.
import type { V1ObjectMeta, V1PodTemplateSpec } from '@kubernetes/client-node';
import type { DeploymentSpec } from '#api';
import { findFlagByDest } from '#sglang/catalogue.ts';

export const LWS_GROUP = 'leaderworkerset.x-k8s.io';
export const LWS_API_VERSION = `${LWS_GROUP}/v1`;
/** Labels and annotation the LWS controller puts on every pod of a group. */
export const LWS_SET_NAME_LABEL = 'leaderworkerset.sigs.k8s.io/name';
export const LWS_GROUP_INDEX_LABEL = 'leaderworkerset.sigs.k8s.io/group-index';
export const LWS_WORKER_INDEX_LABEL = 'leaderworkerset.sigs.k8s.io/worker-index';
export const LWS_SIZE_ANNOTATION = 'leaderworkerset.sigs.k8s.io/size';
/** Env vars the LWS pod webhook injects into every container of a group's pods. */
export const LWS_LEADER_ADDRESS_ENV = 'LWS_LEADER_ADDRESS';
export const LWS_WORKER_INDEX_ENV = 'LWS_WORKER_INDEX';
/**
 * The leader's torch.distributed rendezvous port (--dist-init-addr host:port); with attention DP
 * SGLang also takes the six ports after it. Clear of SGLang's HTTP port and the bootstrap default.
 */
export const DIST_INIT_PORT = 20000;

export interface LeaderWorkerSet {
  apiVersion: typeof LWS_API_VERSION;
  kind: 'LeaderWorkerSet';
  metadata: V1ObjectMeta;
  spec: {
    replicas: number;
    startupPolicy: 'LeaderCreated';
    rolloutStrategy: {
      type: 'RollingUpdate';
      rollingUpdateConfiguration: { maxSurge: number; maxUnavailable: number };
    };
    leaderWorkerTemplate: {
      size: number;
      restartPolicy: 'RecreateGroupOnPodRestart';
      leaderTemplate: V1PodTemplateSpec;
      workerTemplate: V1PodTemplateSpec;
    };
  };
}

export function isMultiNode(spec: Pick<DeploymentSpec, 'parallelism'>): boolean {
  return spec.parallelism.nodes > 1;
}

/** What a Service of a multi-node engine selects on top of its role: the leaders, which serve. */
export function buildLeaderSelector(spec: Pick<DeploymentSpec, 'parallelism'>): Record<string, string> {
  return isMultiNode(spec) ? { [LWS_WORKER_INDEX_LABEL]: '0' } : {};
}

function flag(dest: string): string {
  const name = findFlagByDest(dest)?.name;
  if (name === undefined) throw new Error(`${dest} is not a flag of the pinned SGLang`);
  return name;
}

/**
 * A pod's place in its group, after the engine's rendered arguments (--nnodes is one of those,
 * and so identity): the leader is rank 0, a worker the index LWS gave it; everyone dials the
 * leader by the address LWS gave it. The kubelet expands `$(…)` from the injected env.
 */
export function buildRankArgs(rank: 'leader' | 'worker'): string[] {
  return [
    flag('node_rank'),
    rank === 'leader' ? '0' : `$(${LWS_WORKER_INDEX_ENV})`,
    flag('dist_init_addr'),
    `$(${LWS_LEADER_ADDRESS_ENV}):${DIST_INIT_PORT}`,
  ];
}

export function buildLeaderWorkerSet(input: {
  metadata: V1ObjectMeta;
  replicas: number;
  nodes: number;
  leader: V1PodTemplateSpec;
  worker: V1PodTemplateSpec;
}): LeaderWorkerSet {
  return {
    apiVersion: LWS_API_VERSION,
    kind: 'LeaderWorkerSet',
    metadata: input.metadata,
    spec: {
      replicas: input.replicas,
      // Workers start with their leader, not after it is Ready: SGLang's leader is Ready only
      // once every rank has joined, so LeaderReady would never start a group.
      startupPolicy: 'LeaderCreated',
      // As the single-node Deployments roll: a new group comes up before an old one goes.
      rolloutStrategy: {
        type: 'RollingUpdate',
        rollingUpdateConfiguration: { maxSurge: 1, maxUnavailable: 0 },
      },
      leaderWorkerTemplate: {
        size: input.nodes,
        // A group with a lost rank cannot serve (its collectives hang): restart all of it.
        restartPolicy: 'RecreateGroupOnPodRestart',
        leaderTemplate: input.leader,
        workerTemplate: input.worker,
      },
    },
  };
}
