// Qualifications from Kubernetes, for the status page's plots: an informer on
// Qualification objects (all namespaces, or one per listed namespace) →
// buildQualificationViews → one swap. Only their status is read (the operator
// stores the distributions there, ADR 0040): the gateway needs no ConfigMap,
// so the record ConfigMaps (and every other) stay out of its rights. Routing
// never waits for it: readiness does not depend on this watcher.
import type { Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import {
  buildQualificationViews,
  type QualificationIssue,
  type QualificationView,
} from './qualification-view.ts';
import type { WatchedKind } from './informer-group.ts';
import { SnapshotWatcher, type SnapshotWatcherOptions } from './snapshot-watcher.ts';

interface BuiltViews {
  readonly views: readonly QualificationView[];
  readonly issues: readonly QualificationIssue[];
}

export class QualificationWatcher extends SnapshotWatcher<QualificationIssue, BuiltViews> {
  protected readonly issueMessage = 'qualification not plotted';
  protected override readonly clearedMessage = 'qualification plotted again';
  #views: readonly QualificationView[] = [];
  #synced = false;

  constructor(opts: SnapshotWatcherOptions) {
    super(opts, 'qualifications');
  }

  /** The Qualifications to plot, newest first. */
  views(): readonly QualificationView[] {
    return this.#views;
  }

  /** Listed once (tests, diagnostics): /status shows none until then. */
  hasSynced(): boolean {
    return this.#synced;
  }

  protected kinds(): readonly WatchedKind[] {
    return [{ resource: Resources.qualifications }];
  }

  protected build([objects = []]: readonly (readonly KubeObject[])[]): BuiltViews {
    return buildQualificationViews(objects);
  }

  protected swap(built: BuiltViews): void {
    this.#views = built.views;
  }

  protected synced(log: Logger): void {
    this.#synced = true;
    log.info('qualifications synced', { qualifications: this.#views.length });
  }
}
