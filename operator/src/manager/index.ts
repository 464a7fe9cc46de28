// The controller runtime: informers, work queues, reconcile contract, server-side apply,
// status, conditions, events, leader election and the manager that wires them.
export * from './apply.ts';
export * from './apply-plan.ts';
export * from './cache.ts';
export * from '#kube/client.ts';
export * from '#kube/clock.ts';
export * from './conditions.ts';
export * from './events.ts';
export * from './health-server.ts';
export * from '#kube/informer.ts';
export * from './leader.ts';
export * from '#kube/logger.ts';
export * from './manager.ts';
export * from './metrics.ts';
export * from '#kube/objects.ts';
export * from './rate-limiter.ts';
export { TerminalError, isTerminalError } from './reconcile.ts';
export type { ReconcileContext, ReconcileResult, Reconciler } from './reconcile.ts';
export * from './request-counter.ts';
export * from '#kube/resources.ts';
export * from './status.ts';
export * from '#kube/time.ts';
export * from './workqueue.ts';
