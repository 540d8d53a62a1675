// Command tool-fs is the builtin filesystem tool plugin: fs.read, fs.list,
// fs.exists over a read-only project root, and fs.write, which never touches
// the project: it leaves a patch (or the full file) in the call's output
// directory for the kernel to review and merge.
//
// Every path is confined to the root: absolute paths, `..` that leaves it,
// and symlinks pointing outside are refused with a structured error.
package main
