/**
 * Where the stores keep their files under the state directory (docs/stores.md), and the file
 * name of each key: one key, one name, never a path outside the store. A key that could not name
 * a file inside its store is an InvalidIdError before any path is built from it.
 */
import { isUnambiguousFileName, unambiguousManifestFileName } from "../core/checkpoint_layout.ts";
import { parseValidId } from "../core/ids.ts";

export const STATUS_DIR = "status";
export const SANDBOX_DIR = "sandboxes";
export const QUARANTINE_DIR = "quarantine";

/** State may reveal what runs on the node; records and their directories are root-only. */
export const RECORD_FILE_MODE = 0o600;
export const STORE_DIR_MODE = 0o700;

const RECORD_SUFFIX = ".json";

export class InvalidIdError extends Error {
  override name = "InvalidIdError";
}

/**
 * `namespace/name` → `<namespace>_<name>.json`, the unambiguous name of its checkpoint's manifest
 * (lib/core/checkpoint_layout.ts): Kubernetes names cannot contain an underscore, so no two ids
 * share one. A name too long for a file is shortened with a digest of the id; the record inside
 * says the whole id, and a record is read only under its own id's name (record_files.ts).
 */
export function statusFileName(id: string): string {
  if (!parseValidId(id)) {
    throw new InvalidIdError(
      `checkpoint id ${JSON.stringify(id)}: not namespace/name with Kubernetes-valid names`,
    );
  }
  return unambiguousManifestFileName(id);
}

/** Whether `fileName` is the status file name of some id. */
export function isStatusFileName(fileName: string): boolean {
  return isUnambiguousFileName(fileName);
}

export const MAX_SANDBOX_ID_LENGTH = 128;
/** CRI sandbox ids are hex digests; this admits more, but never a separator or a leading dot. */
const SANDBOX_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Why a sandbox id is refused, or undefined when it is valid. */
export function sandboxIdProblem(sandboxId: string): string | undefined {
  if (sandboxId.length === 0) return "empty";
  if (sandboxId.length > MAX_SANDBOX_ID_LENGTH) {
    return `longer than ${MAX_SANDBOX_ID_LENGTH} characters`;
  }
  if (sandboxId.includes("..")) return "contains ..";
  if (!SANDBOX_ID.test(sandboxId)) {
    return "only letters, digits, '.', '_' and '-' are allowed, starting with a letter or digit";
  }
  return undefined;
}

/** `<sandboxId>.json`, after validating the id. */
export function sandboxFileName(sandboxId: string): string {
  const problem = sandboxIdProblem(sandboxId);
  if (problem) throw new InvalidIdError(`sandbox id ${JSON.stringify(sandboxId)}: ${problem}`);
  return `${sandboxId}${RECORD_SUFFIX}`;
}

/** Whether `fileName` is the file name of some sandbox id. */
export function isSandboxFileName(fileName: string): boolean {
  return fileName.endsWith(RECORD_SUFFIX) &&
    sandboxIdProblem(fileName.slice(0, -RECORD_SUFFIX.length)) === undefined;
}
