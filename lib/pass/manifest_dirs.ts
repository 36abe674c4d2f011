/**
 * What the agent sees to once per process before it writes in the manifest dirs: whether
 * activation can link, and that no temp file a crash left stays behind.
 */
import type { CheckpointTrees } from "../core/checkpoint_layout.ts";
import { sweepTempFiles } from "../disk/atomic_write.ts";
import { separateMounts } from "../disk/mounts.ts";
import type { Clock } from "../core/time.ts";
import type { Logger } from "../util/log.ts";
import { ProblemLog } from "./problem_log.ts";

export class ManifestDirChecks {
  /** Whether this process has swept both manifest dirs of temp files a crash left. */
  #swept = false;
  /** Whether this process has looked at the manifest dirs' mounts. */
  #mountsChecked = false;
  /** Dirs whose sweep failed, tried again each pass: said once, and when it works. */
  readonly #unswept: ProblemLog;

  constructor(
    private readonly trees: Pick<CheckpointTrees, "staticPodDir" | "inactiveDir">,
    private readonly log: Logger,
    clock: Clock,
  ) {
    this.#unswept = new ProblemLog(log, clock, "temp files swept");
  }

  async beforeWriting() {
    this.#warnIfActivationCopies();
    await this.#sweepOnce();
  }

  /**
   * Activation hard-links the inactive manifest, which needs no free space; across two mounts
   * link(2) fails and the manifest is copied, which does. Said once per process, with the fix.
   */
  #warnIfActivationCopies() {
    if (this.#mountsChecked) return;
    this.#mountsChecked = true;
    const mounts = separateMounts(this.trees.staticPodDir, this.trees.inactiveDir);
    if (!mounts) return;
    this.log.warn(
      "the static-pod dir and the inactive dir are on separate mounts: activation copies " +
        "manifests instead of linking them, and fails on a full disk; make them one mount " +
        "(under systemd, one ReadWritePaths= entry that holds both)",
      { staticPodDir: mounts[0], inactiveDir: mounts[1] },
    );
  }

  /**
   * A write or link a crash interrupted leaves a temp file in a manifest dir, which the kubelet
   * ignores but which holds space (a copy) or an inode. A failure is tried again on the next
   * pass; it stops no write.
   */
  async #sweepOnce() {
    if (this.#swept) return;
    let swept = true;
    for (const dir of [this.trees.staticPodDir, this.trees.inactiveDir]) {
      try {
        const files = await sweepTempFiles(dir);
        if (files.length > 0) this.log.info("leftover temp files removed", { dir, files });
        this.#unswept.over(dir);
      } catch (e) {
        swept = false;
        this.#unswept.there(dir, {
          level: "warn",
          msg: "temp files not swept; tried again next pass",
          about: { dir },
          fields: { error: (e as Error).message },
        });
      }
    }
    this.#swept = swept;
  }
}
