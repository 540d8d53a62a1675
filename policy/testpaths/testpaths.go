package testpaths

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/glob"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// CodeInvalid is the error code of a bad test_paths section.
const CodeInvalid = "POLICY_TEST_PATHS_INVALID"

// Section is the policy section that overrides the defaults.
const Section = "test_paths"

// Default returns the per-language test path patterns, each the runner's
// own convention (gitignore semantics: a pattern without a slash matches at
// any depth, "dir/" matches a directory of that name anywhere and everything
// below it). A fresh map each call.
func Default() map[string][]string {
	return map[string][]string{
		// go test: files ending in _test.go; testdata/ is ignored by the
		// go tool and holds the tests' fixtures.
		"go": {"*_test.go", "testdata/"},
		// pytest's default discovery (python_files) and its fixture files,
		// and the usual tests/ directory.
		"python": {"test_*.py", "*_test.py", "conftest.py", "tests/"},
		// Jest, Vitest and node --test: *.test.* / *.spec.* files and
		// __tests__/ directories.
		"js": {"*.test.*", "*.spec.*", "__tests__/"},
		// cargo: integration tests live in tests/ (unit tests inside a
		// source file cannot be told apart by path).
		"rust": {"tests/"},
		// A test/ directory in any language (mocha's default, Maven-style
		// layouts, shell test suites).
		"common": {"test/"},
	}
}

// Set is a compiled group of test path patterns. Immutable; safe for
// concurrent use.
type Set struct {
	groups map[string][]string
	set    *glob.Set
	list   string
}

// Compile builds a Set from patterns by group (language). Empty groups
// are dropped.
func Compile(groups map[string][]string) (*Set, error) {
	s := &Set{groups: map[string][]string{}}
	var all []string
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		if len(groups[g]) == 0 {
			continue
		}
		s.groups[g] = slices.Clone(groups[g])
		all = append(all, groups[g]...)
	}
	set, err := glob.CompileSet(all)
	if err != nil {
		return nil, uerr.Wrap(err, CodeInvalid, "bad test path pattern", err.Error(), "fix the pattern under test_paths in the policy (.gitignore syntax)")
	}
	s.set, s.list = set, strings.Join(all, ", ")
	return s, nil
}

// MustDefault is the compiled Default.
func MustDefault() *Set {
	s, err := Compile(Default())
	if err != nil {
		panic(err) // the defaults are fixed in this file
	}
	return s
}

// Match reports whether the parsed path is a test path.
func (s *Set) Match(p glob.Path) bool { return s.set.Match(p) }

// IsTest reports whether p (project-relative, slash-separated) is a test
// path.
func (s *Set) IsTest(p string) bool {
	var buf [24]string
	return s.set.Match(glob.ParsePathBuf(buf[:0], p))
}

// Groups returns the patterns by group (a copy).
func (s *Set) Groups() map[string][]string {
	out := make(map[string][]string, len(s.groups))
	for k, v := range s.groups {
		out[k] = slices.Clone(v)
	}
	return out
}

// String lists every pattern, groups in name order.
func (s *Set) String() string { return s.list }

// Describe lists the patterns group by group: "common: test/; go:
// *_test.go, testdata/; ...".
func (s *Set) Describe() string {
	var b strings.Builder
	for i, g := range slices.Sorted(maps.Keys(s.groups)) {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(g)
		b.WriteString(": ")
		b.WriteString(strings.Join(s.groups[g], ", "))
	}
	return b.String()
}

// FromYAML reads a `test_paths: {group: [globs]}` section on top of the
// defaults: a group it lists replaces that default (an empty list removes
// it), the others keep theirs. n may be nil (the defaults). file names the
// policy in messages.
func FromYAML(file string, n *yaml.Node) (*Set, error) {
	groups := Default()
	if n != nil && !(n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		if n.Kind != yaml.MappingNode {
			return nil, bad(file, n, "test_paths must be a mapping of language to globs", "found "+kind(n), `write e.g. test_paths: {go: ["*_test.go"]}`)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "" {
				return nil, bad(file, k, "empty language name in test_paths", "each key names a language or a group of test paths", `write e.g. go: ["*_test.go"]`)
			}
			l, err := globs(file, v, "test_paths."+k.Value)
			if err != nil {
				return nil, err
			}
			groups[k.Value] = l
		}
	}
	s, err := Compile(groups)
	if err != nil {
		if ue, ok := uerr.As(err); ok && n != nil {
			ue.WithContext("%s:%d", file, n.Line)
		}
		return nil, err
	}
	return s, nil
}

func globs(file string, n *yaml.Node, what string) ([]string, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, bad(file, n, what+" must be a list of globs", "found "+kind(n), `write e.g. ["*_test.go"]`)
	}
	out := make([]string, 0, len(n.Content))
	for _, e := range n.Content {
		if e.Kind != yaml.ScalarNode || e.Tag != "!!str" {
			return nil, bad(file, e, what+" must list strings", "found "+kind(e), "quote the glob")
		}
		if _, err := glob.Compile(e.Value); err != nil {
			return nil, bad(file, e, fmt.Sprintf("bad glob %q in %s", e.Value, what), err.Error(), "globs use .gitignore syntax")
		}
		out = append(out, e.Value)
	}
	return out, nil
}

func bad(file string, n *yaml.Node, what, why, fix string) error {
	return uerr.New(CodeInvalid, what, why, fix).WithContext("%s:%d", file, n.Line)
}

func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "something else"
}
