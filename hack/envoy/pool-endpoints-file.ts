// Writes the pool endpoints file a FailOpen Envoy follows (bootstrap.ts, FailOpen part 2;
// renderPoolEndpointsFile renders it): whole, under a temporary name beside it, then renamed
// over it. Envoy's filesystem subscription reloads on the rename (a file rewritten in place is
// never seen, and a half-written one could be read), so each change is one atomic rename.
// Owner-only: the file holds the runtimes' keys.
import { replaceFile } from '../../test/support/replace-file.ts';

export function replacePoolEndpointsFile(path: string, text: string): void {
  replaceFile(path, text, 0o600);
}
