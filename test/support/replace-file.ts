// A file another process follows (Envoy's filesystem subscription, Prometheus's
// file_sd, the bench's tier file), replaced whole: written under a temporary
// name beside it, then renamed over it. A reader never sees half a file, and
// a watcher that reloads on the rename sees every change.
import { renameSync, writeFileSync } from 'node:fs';

/** `path` now holds `text`, swapped in by one rename; `mode`: the file's permissions (e.g. owner-only). */
export function replaceFile(path: string, text: string, mode?: number): void {
  // Beside it (a rename within one filesystem), named by process: two writers never share one.
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, text, mode !== undefined ? { mode } : {});
  renameSync(temporary, path);
}
