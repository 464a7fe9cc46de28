// Runs `fn` over `items` with at most `limit` at a time. The first failure stops new work and
// aborts the running ones (a mismatch should not leave 10 GB downloads going), then is thrown.
export async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const controller = new AbortController();
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (!failure && next < items.length) {
      const item = items[next++] as T;
      try {
        await fn(item, controller.signal);
      } catch (error) {
        // Only the first error counts: the others are mostly the aborts it caused.
        failure ??= { error };
        controller.abort();
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (failure) throw failure.error;
}
