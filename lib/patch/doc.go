// Package patch owns line-based unified diffs: making one from two
// versions of a file, and applying one to a base that must still match its
// context. Tools emit patches into their output directory; the kernel's
// merge applies them. It must not touch the filesystem.
package patch
