/**
 * Where the stores keep their files under the state directory (docs/stores.md), and the two
 * bijections between keys and file names. A key that could not name a file inside its store is
 * an InvalidIdError before any path is built from it.
 */
import { parseValidId } from "../core/ids.ts";

export const STATUS_DIR = "status";
export const SANDBOX_DIR = "sandboxes";
export const QUARANTINE_DIR = "quarantine";

/** State may reveal what runs on the node; records and their directories are root-only. */
export const RECORD_FILE_MODE = 0o600;
export const STORE_DIR_MODE = 0o700;

const RECORD_SUFFIX = ".json";
/** Linux's NAME_MAX: a key whose file name would be longer cannot be stored. */
const MAX_FILE_NAME_BYTES = 255;

export class InvalidIdError extends Error {
  override name = "InvalidIdError";
}

function checkedFileName(kind: string, key: string, fileName: string): string {
  if (new TextEncoder().encode(fileName).length > MAX_FILE_NAME_BYTES) {
    throw new InvalidIdError(
      `${kind} ${JSON.stringify(key)}: its file name would exceed ${MAX_FILE_NAME_BYTES} bytes`,
    );
  }
  return fileName;
}

/**
 * `namespace/name` → `<namespace>_<name>.json`. Kubernetes names cannot contain an underscore,
 * so the file name maps back to exactly one id.
 */
export function statusFileName(id: string): string {
  const parts = parseValidId(id);
  if (!parts) {
    throw new InvalidIdError(
      `checkpoint id ${JSON.stringify(id)}: not namespace/name with Kubernetes-valid names`,
    );
  }
  return checkedFileName("checkpoint id", id, `${parts.namespace}_${parts.name}${RECORD_SUFFIX}`);
}

/** The id a status file name stands for; undefined when the name is not one we would write. */
export function statusIdOfFileName(fileName: string): string | undefined {
  if (!fileName.endsWith(RECORD_SUFFIX)) return undefined;
  const parts = fileName.slice(0, -RECORD_SUFFIX.length).split("_");
  if (parts.length !== 2) return undefined;
  const id = `${parts[0]}/${parts[1]}`;
  return parseValidId(id) ? id : undefined;
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

export function sandboxIdOfFileName(fileName: string): string | undefined {
  if (!fileName.endsWith(RECORD_SUFFIX)) return undefined;
  const id = fileName.slice(0, -RECORD_SUFFIX.length);
  return sandboxIdProblem(id) === undefined ? id : undefined;
}
