// Package glob owns path patterns with .gitignore semantics, compiled once
// and matched without allocation: `**` spans any number of directories, a
// pattern without a slash matches at any depth, a leading `/` (or a slash in
// the middle) anchors it to the project root, a trailing `/` matches
// directories only, and a pattern matching a directory matches everything
// beneath it. A Set combines patterns where an exclude (`!pattern`) always
// beats an include, whatever the order.
//
// It must not touch the filesystem: whether a path is a directory is told by
// the caller (a trailing slash).
package glob
