// Command tool-fs is the builtin filesystem tool plugin: fs.read (numbered
// lines, a line range), fs.list and fs.exists over a read-only project root,
// and the tools that change files, fs.write, fs.edit (exact-string
// replacement) and fs.apply_patch (a *** Begin Patch envelope or a unified
// diff, several files). These never touch the project: they leave a patch
// (or the full file) per changed file in the call's output directory for
// the kernel to judge, review and merge, all of a call's changes or none.
//
// Every path is confined to the root: absolute paths, `..` that leaves it,
// and symlinks pointing outside are refused with a structured error.
package main
