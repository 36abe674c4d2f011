/**
 * Loaded before `main.ts` (`deno run --preload`) by bench/daemon_profile.ts: the first SIGUSR2
 * starts V8's CPU profiler, the second writes the profile to $CKPT_BENCH_CPU_PROFILE (a
 * .cpuprofile, for bench/cpu_profile_summary.ts).
 */
import { Session } from "node:inspector/promises";

const file = Deno.env.get("CKPT_BENCH_CPU_PROFILE");
if (!file) throw new Error("CKPT_BENCH_CPU_PROFILE is not set");
const session = new Session();
let profiling = false;
Deno.addSignalListener("SIGUSR2", async () => {
  if (!profiling) {
    profiling = true;
    session.connect();
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 200 });
    await session.post("Profiler.start");
    return;
  }
  const { profile } = await session.post("Profiler.stop");
  await Deno.writeTextFile(file, JSON.stringify(profile));
});
