/**
 * Maps over items with at most `limit` calls in flight, results in input order. Deno's async
 * file operations each wait for a thread-pool round trip, so reading 10,000 records one after
 * the other is several times slower than keeping a few dozen reads in flight.
 */
export async function mapConcurrent<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/**
 * Runs `fn` on every item as mapConcurrent does, but lets every call end before a failure is
 * thrown (the first): for writes whose directories the caller fsyncs afterwards, whatever
 * failed, so that no file renamed into place is left without that fsync.
 */
export async function forEachSettled<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let failure: { error: unknown } | undefined;
  await mapConcurrent(items, limit, async (item) => {
    try {
      await fn(item);
    } catch (error) {
      failure ??= { error };
    }
  });
  if (failure) throw failure.error;
}
