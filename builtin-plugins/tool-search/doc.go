// Command tool-search is the builtin search tool plugin: search.grep (Go
// regular expressions over the project's text files, file:line:text
// results) and search.glob (paths matching a .gitignore-style glob). Both
// walk the read-only workspace without following symlinks, skip `.git/`,
// honour the project's .gitignore files (and .git/info/exclude) the way git
// does, and stop at a result cap with an explicit "truncated" marker.
//
// It never writes anything and never reads outside the workspace root.
package main
