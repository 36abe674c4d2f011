/**
 * V8's sampling heap profiler as the memory benches use it (bench/memory_preload.ts,
 * bench/memory_agent.ts): every allocation sampled, garbage included, so that a profile shows
 * what a pass allocates and not only what survives it (for bench/allocation_summary.ts).
 */
import type { Session } from "node:inspector/promises";

export async function startAllocationSampling(session: Session): Promise<void> {
  session.connect();
  await session.post("HeapProfiler.enable");
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 16384,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
}

/** The profile sampled since startAllocationSampling, as JSON for a file. */
export async function stopAllocationSampling(session: Session): Promise<string> {
  const { profile } = await session.post("HeapProfiler.stopSampling");
  return JSON.stringify(profile);
}
