// Command tool-shell is the builtin `shell.exec` tool: it runs one program
// with an argument vector — never through a shell — in a directory of the
// session's read-only view, with a timeout and capped output.
//
// Shells and programs whose job is to run another program (sh, bash, env,
// xargs, nice, busybox, ...) are refused, by name and by the name their
// path resolves to, so a command cannot smuggle a shell line past review.
// The program runs confined by Landlock (builtin-plugins/internal/landlock):
// it can write only a per-call scratch directory, never /out or anything
// that outlives the call. The default policy denies shell.exec outside
// debug mode and reviews every call in it.
//
// It owns running the one program and bounding what comes back; it must
// not propose file changes or write the project.
package main
