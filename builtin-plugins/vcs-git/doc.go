// Command vcs-git is the builtin VCS plugin (github.com/go-git/go-git/v5):
// status, diff and log of the repository it sees read-only at /workspace,
// and commit.
//
// Commit never writes the repository. It builds the commit of the requested
// paths (their content in the working tree, a missing file is a deletion)
// on top of the current branch's HEAD and leaves the new objects and a
// summary under <out>/commits/<commit id>/ (plugins/vcs.CommitDir); the
// kernel (host/commit) checks that output against what it merged and
// fast-forwards the branch itself.
//
// It must not write anything but its output directory, and it reads only
// through go-git on the workspace it was configured with.
package main
