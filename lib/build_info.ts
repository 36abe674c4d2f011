/**
 * What the build knows and the compiled binary cannot find out: it runs no git and reads no file
 * of the source tree. scripts/compile.ts writes this file anew, with the commit, into the copy of
 * the tree it compiles; the checked-in file says nothing, and `ckpt-agent version` run from a
 * source tree asks git instead (lib/git_commit.ts).
 */
export const BUILD_COMMIT: string | undefined = undefined;
