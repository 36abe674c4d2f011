/**
 * The manifest file name of every checkpoint this pass writes, assigned before any write so that
 * two checkpoints written at once never target one file (the rule: lib/core/manifest_names.ts).
 */
import {
  assignManifestNames,
  type ManifestListing,
  type ManifestNames,
} from "../core/manifest_names.ts";
import type { PassResult } from "../core/pass.ts";
import type { Logger } from "../util/log.ts";
import { checkpointedIds } from "./checkpoints.ts";

export class ManifestNamer {
  /** Per parent: the file name it got because bootkube's was taken, once said. */
  readonly #said = new Map<string, string>();
  /** The manifest file name of every checkpoint, as the last pass that wrote assigned them. */
  #files: ReadonlyMap<string, string> = new Map();

  constructor(private readonly log: Logger) {}

  /** The file name of a checkpoint's manifests; undefined before a pass has placed it. */
  fileOf(id: string): string | undefined {
    return this.#files.get(id);
  }

  /** The names of this pass's checkpoints, from the files both manifest dirs hold. */
  assign(result: PassResult, listing: ManifestListing): ManifestNames {
    const names = assignManifestNames(checkpointedIds(result), listing);
    this.#files = names.names;
    for (const id of this.#said.keys()) if (!result.tracked.has(id)) this.#said.delete(id);
    this.#sayClashes(names);
    return names;
  }

  /** Which parent got which file name because bootkube's was taken: said once per parent. */
  #sayClashes(names: ManifestNames) {
    for (const { id, file, reason } of names.clashes) {
      if (this.#said.get(id) === file) continue;
      this.#said.set(id, file);
      this.log.info("manifest file name taken: the checkpoint gets a name of its own", {
        id,
        file,
        reason,
      });
    }
  }
}
