// Package toolpath is the plugin side of path confinement for tool
// plugins, a thin face of the one confinement helper (package confine): it validates a project-relative path an AI sent (no absolute
// path, no `..` leaving the root, no NUL), opens the read-only workspace as
// an os.Root (which refuses any traversal, symlinks included, that leaves
// it) and turns filesystem errors on confined paths into structured errors.
//
// It must not decide what a plugin may read or write (the kernel's policy
// and the filtered view do) and must not touch anything outside the root it
// is given.
package toolpath
