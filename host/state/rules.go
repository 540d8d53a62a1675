package state

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/glob"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/testpaths"
)

// CodeConfigInvalid is the error code of a bad test_paths, tdd_exemptions
// or tech_debt section.
const CodeConfigInvalid = "STATE_CONFIG_INVALID"

// Policy sections this package owns (policy.Policy.Section).
const (
	SectionTestPaths  = testpaths.Section // read by the policy loader
	SectionExemptions = "tdd_exemptions"
	SectionTechDebt   = "tech_debt"
)

// ExemptionCategory is one of the TDD exemption categories.
type ExemptionCategory string

// The four categories.
const (
	ConfigChange  ExemptionCategory = "config_change"
	TypeRefactor  ExemptionCategory = "type_refactor"
	Documentation ExemptionCategory = "documentation"
	AssetUpdate   ExemptionCategory = "asset_update"
)

// Categories lists the exemption categories.
var Categories = []ExemptionCategory{ConfigChange, TypeRefactor, Documentation, AssetUpdate}

// DefaultTestPaths are the per-language test path patterns: the policy's
// one table (policy/testpaths), so the gate and the policy's path_class
// never disagree.
func DefaultTestPaths() map[string][]string { return testpaths.Default() }

// DefaultExemptions are the exemption globs. type_refactor covers
// declaration files only: fluffy does no static "type-only change"
// analysis, so it cannot exempt ordinary .ts files (docs/decisions/tech-debt-budget.md).
func DefaultExemptions() map[ExemptionCategory][]string {
	return map[ExemptionCategory][]string{
		ConfigChange:  {"*.json", "*.yaml", "*.yml", "*.toml", "*.env", "Dockerfile", ".github/"},
		TypeRefactor:  {"*.d.ts"},
		Documentation: {"*.md", "*.txt", "LICENSE", "CHANGELOG"},
		AssetUpdate:   {"*.png", "*.svg", "*.css", "*.scss"},
	}
}

// DebtConfig is the tech-debt budget.
// Thresholds are coverage drops in percentage points below the baseline.
type DebtConfig struct {
	// Warn: a drop greater than this is allowed with a warning (default 2).
	Warn float64
	// Lockout: a drop greater than this refuses the commit and locks
	// explore mode until a strict commit restores coverage (default 5).
	Lockout float64
}

// DefaultDebt is the -2 / -5.
func DefaultDebt() DebtConfig { return DebtConfig{Warn: 2, Lockout: 5} }

// BaselineFile is the coverage baseline, relative to the project root. The
// policy's built-in state-store rule protects it from every plugin write.
const BaselineFile = ".fluffy/coverage-baseline.json"

// Rules say which paths are tests and which are exempt, and how much
// coverage debt explore mode may take. Built once (from the policy) and
// shared read-only by every machine of a project.
type Rules struct {
	tests     *testpaths.Set
	exempt    map[ExemptionCategory][]string
	exemptSet map[ExemptionCategory]*glob.Set
	anyExempt *glob.Set
	debt      DebtConfig
	testList  string
	avail     map[posKey][]string
}

// DefaultRules are the rules without a policy file.
func DefaultRules() *Rules {
	r, err := NewRules(DefaultTestPaths(), DefaultExemptions(), DefaultDebt())
	if err != nil {
		panic(err) // the defaults are fixed in this file
	}
	return r
}

// NewRules compiles the given patterns.
func NewRules(testPaths map[string][]string, exemptions map[ExemptionCategory][]string, debt DebtConfig) (*Rules, error) {
	tests, err := testpaths.Compile(testPaths)
	if err != nil {
		return nil, uerr.Wrap(err, CodeConfigInvalid, "bad test path pattern", err.Error(), "fix the pattern under test_paths in the policy")
	}
	return newRules(tests, exemptions, debt)
}

func newRules(tests *testpaths.Set, exemptions map[ExemptionCategory][]string, debt DebtConfig) (*Rules, error) {
	r := &Rules{tests: tests, exempt: map[ExemptionCategory][]string{}, exemptSet: map[ExemptionCategory]*glob.Set{}, debt: debt}
	var err error
	var anyEx []string
	for c, pats := range exemptions {
		if !slices.Contains(Categories, c) {
			return nil, uerr.New(CodeConfigInvalid, fmt.Sprintf("unknown exemption category %q", c), "the categories are "+joinCats(), "use one of them")
		}
		if len(pats) == 0 {
			continue
		}
		s, err := glob.CompileSet(pats)
		if err != nil {
			return nil, uerr.Wrap(err, CodeConfigInvalid, "bad exemption pattern for "+string(c), err.Error(), "fix the pattern under tdd_exemptions in the policy")
		}
		r.exempt[c] = slices.Clone(pats)
		r.exemptSet[c] = s
		anyEx = append(anyEx, pats...)
	}
	sort.Strings(anyEx)
	if r.anyExempt, err = glob.CompileSet(anyEx); err != nil {
		return nil, err
	}
	if debt.Warn < 0 || debt.Lockout < debt.Warn {
		return nil, uerr.New(CodeConfigInvalid, fmt.Sprintf("bad tech-debt thresholds: warn at a %g-point drop, lock at %g", debt.Warn, debt.Lockout),
			"both are coverage drops below the baseline, and the lockout cannot come before the warning", "write e.g. warning_threshold: -2 and lockout_threshold: -5")
	}
	r.precompute()
	return r, nil
}

func joinCats() string {
	s := make([]string, len(Categories))
	for i, c := range Categories {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

// TestPaths returns the test path patterns by language.
func (r *Rules) TestPaths() map[string][]string { return r.tests.Groups() }

// Tests is the compiled test path table.
func (r *Rules) Tests() *testpaths.Set { return r.tests }

// Exemptions returns the exemption patterns by category.
func (r *Rules) Exemptions() map[ExemptionCategory][]string {
	out := map[ExemptionCategory][]string{}
	for k, v := range r.exempt {
		out[k] = slices.Clone(v)
	}
	return out
}

// Debt returns the tech-debt thresholds.
func (r *Rules) Debt() DebtConfig { return r.debt }

// PathClass is what the workflow makes of a path.
type PathClass uint8

// Path classes. A test path is a test even when it also matches an
// exemption glob (testdata/config.json is test data).
const (
	ClassSource PathClass = iota
	ClassTest
	ClassExempt
)

func (c PathClass) String() string {
	return [...]string{"source", "test", "exempt"}[c]
}

// Classify says whether p (project-relative, slash-separated) is a test
// path, a path some exemption category covers, or source.
func (r *Rules) Classify(p string) PathClass {
	var buf [24]string
	pth := glob.ParsePathBuf(buf[:0], p)
	return r.classify(pth)
}

func (r *Rules) classify(pth glob.Path) PathClass {
	if r.tests.Match(pth) {
		return ClassTest
	}
	if r.anyExempt.Match(pth) {
		return ClassExempt
	}
	return ClassSource
}

// IsTest reports whether p is a test path.
func (r *Rules) IsTest(p string) bool { return r.Classify(p) == ClassTest }

// exemptCategories lists the categories whose globs match p.
func (r *Rules) exemptCategories(p string) []ExemptionCategory {
	var out []ExemptionCategory
	pth := glob.ParsePath(p)
	for _, c := range Categories {
		if s := r.exemptSet[c]; s != nil && s.Match(pth) {
			out = append(out, c)
		}
	}
	return out
}

// RulesFromPolicy takes the policy's test paths (its test_paths section on
// top of the defaults, read by the policy loader) and reads the
// tdd_exemptions and tech_debt sections of p on top of the defaults. A
// category the policy lists replaces that default (an empty list removes
// it); the others keep their defaults. p may be nil.
func RulesFromPolicy(p *policy.Policy) (*Rules, error) {
	ex, debt := DefaultExemptions(), DefaultDebt()
	if p == nil {
		return NewRules(DefaultTestPaths(), ex, debt)
	}
	tests := p.Tests
	if tests == nil { // a Policy not made by policy.Load
		tests = testpaths.MustDefault()
	}
	cf := configFile{name: p.File}
	if n, ok := p.Section(SectionExemptions); ok {
		if err := cf.exemptions(n, ex); err != nil {
			return nil, err
		}
	}
	if n, ok := p.Section(SectionTechDebt); ok {
		if err := cf.techDebt(n, &debt); err != nil {
			return nil, err
		}
	}
	r, err := newRules(tests, ex, debt)
	if err != nil {
		if ue, ok := uerr.As(err); ok && ue.Context == "" {
			ue.WithContext("%s", p.File)
		}
		return nil, err
	}
	return r, nil
}

type configFile struct{ name string }

func (c configFile) err(n *yaml.Node, what, why, fix string) error {
	return uerr.New(CodeConfigInvalid, what, why, fix).WithContext("%s:%d", c.name, n.Line)
}

// mapping walks a YAML mapping node.
func (c configFile) mapping(n *yaml.Node, what string, f func(key string, k, v *yaml.Node) error) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return c.err(n, what+" must be a mapping", fmt.Sprintf("found %s", nodeKind(n)), "see docs/policy.md")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if err := f(n.Content[i].Value, n.Content[i], n.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func (c configFile) strings(n *yaml.Node, what string) ([]string, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, c.err(n, what+" must be a list of globs", fmt.Sprintf("found %s", nodeKind(n)), `write e.g. ["*_test.go"]`)
	}
	out := make([]string, 0, len(n.Content))
	for _, e := range n.Content {
		if e.Kind != yaml.ScalarNode || e.Tag != "!!str" {
			return nil, c.err(e, what+" must list strings", fmt.Sprintf("found %s", nodeKind(e)), "quote the glob")
		}
		if _, err := glob.Compile(e.Value); err != nil {
			return nil, c.err(e, fmt.Sprintf("bad glob %q in %s", e.Value, what), err.Error(), "globs use .gitignore syntax")
		}
		out = append(out, e.Value)
	}
	return out, nil
}

func nodeKind(n *yaml.Node) string {
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

// exemptions reads the `tdd_exemptions: {category: {path_glob: [...]}}`.
func (c configFile) exemptions(n *yaml.Node, into map[ExemptionCategory][]string) error {
	return c.mapping(n, SectionExemptions, func(key string, k, v *yaml.Node) error {
		cat := ExemptionCategory(key)
		if !slices.Contains(Categories, cat) {
			return c.err(k, fmt.Sprintf("unknown exemption category %q", key), "the categories are "+joinCats(), "use one of them")
		}
		var globs []string
		seen := false
		err := c.mapping(v, "tdd_exemptions."+key, func(f string, fk, fv *yaml.Node) error {
			switch f {
			case "path_glob":
				l, err := c.strings(fv, "tdd_exemptions."+key+".path_glob")
				globs, seen = l, true
				return err
			case "condition":
				return c.err(fk, "tdd_exemptions."+key+".condition is not supported",
					"fluffy does no static analysis of what a change does, so a condition like type_only_change could not be enforced",
					"remove the condition and restrict path_glob to files that cannot hold runtime code (e.g. *.d.ts)")
			}
			return c.err(fk, fmt.Sprintf("unknown field %q in tdd_exemptions.%s", f, key), "an exemption category has path_glob", "remove the field")
		})
		if err != nil {
			return err
		}
		if !seen {
			return c.err(v, "tdd_exemptions."+key+" has no path_glob", "a category without globs would exempt nothing", "add path_glob: [...] (an empty list disables the category)")
		}
		into[cat] = globs
		return nil
	})
}

// techDebt reads the tech_debt section. Only the values fluffy
// implements are accepted, so nothing in the file is silently ignored.
func (c configFile) techDebt(n *yaml.Node, d *DebtConfig) error {
	return c.mapping(n, SectionTechDebt, func(key string, k, v *yaml.Node) error {
		switch key {
		case "coverage":
			return c.mapping(v, "tech_debt.coverage", func(f string, fk, fv *yaml.Node) error {
				switch f {
				case "baseline_file":
					if fv.Value != BaselineFile {
						return c.err(fv, "tech_debt.coverage.baseline_file must be "+BaselineFile,
							"the baseline lives where the policy's built-in rules protect it from plugin writes", "write baseline_file: "+BaselineFile+" or leave it out")
					}
				case "min_delta":
					var x float64
					if err := fv.Decode(&x); err != nil || x != 0 {
						return c.err(fv, "tech_debt.coverage.min_delta must be 0", "drops smaller than warning_threshold are allowed silently; other values are not implemented", "write min_delta: 0 or leave it out")
					}
				case "warning_threshold", "lockout_threshold":
					var x float64
					if err := fv.Decode(&x); err != nil || x > 0 || x < -100 {
						return c.err(fv, fmt.Sprintf("tech_debt.coverage.%s must be a number between -100 and 0", f), fmt.Sprintf("got %q", fv.Value), "write e.g. -2 (a drop of more than 2 percentage points)")
					}
					if f == "warning_threshold" {
						d.Warn = -x
					} else {
						d.Lockout = -x
					}
				default:
					return c.err(fk, fmt.Sprintf("unknown field %q in tech_debt.coverage", f), "known: baseline_file, min_delta, warning_threshold, lockout_threshold", "remove the field")
				}
				return nil
			})
		case "lockout_action":
			if v.Value != "block_explore" {
				return c.err(v, "tech_debt.lockout_action must be block_explore", "that is the only lockout fluffy implements", "write lockout_action: block_explore or leave it out")
			}
		case "recovery":
			if v.Value != "strict_mode_with_coverage_gain" {
				return c.err(v, "tech_debt.recovery must be strict_mode_with_coverage_gain", "that is the only recovery fluffy implements", "leave it out")
			}
		default:
			return c.err(k, fmt.Sprintf("unknown field %q in tech_debt", key), "known: coverage, lockout_action, recovery", "remove the field")
		}
		return nil
	})
}
