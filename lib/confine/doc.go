// Package confine owns the one answer to "is this path inside the project,
// and what does it really name": the lexical rules for project-relative
// paths (Check, Clean, Name), the paths no plugin ever owns (the kernel's
// .fluffy directory, any .git directory for writes), and resolution of a
// path inside a directory after following its symbolic links (Root), so
// that a path is judged by what it points at, not by its spelling.
//
// The policy engine, the kernel's callbacks, the session workspace, the
// merge, tool plugins and the plugin SDK all call it instead of checking
// ".." themselves.
//
// It must not import any other fluffy package except uerr: plugins link it.
package confine
