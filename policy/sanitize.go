package policy

import (
	"fmt"
	"regexp"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/yamlpos"
)

// SanitizePattern is one user-configured secret pattern (user-configurable
// patterns in policy.yaml). The kernel
// replaces every match in tool output with "[REDACTED:<name>]" before the
// output reaches the model, next to the built-in secret prefixes.
//
//	sanitize:
//	  patterns:
//	    - name: internal-token
//	      regex: 'itk_[A-Za-z0-9]{20,}'
type SanitizePattern struct {
	Name string
	Re   *regexp.Regexp
	Line int
}

// MaxSanitizePatterns bounds the section: every pattern runs over every tool
// output.
const MaxSanitizePatterns = 64

var sanitizeFields = []string{"patterns"}
var sanitizePatternFields = []string{"name", "regex"}

// sanitize loads the `sanitize:` section.
func (l *loader) sanitize(n *yaml.Node) error {
	var patN *yaml.Node
	if err := l.mapping(n, "sanitize", sanitizeFields, func(key string, k, v *yaml.Node) error {
		patN = v
		return nil
	}); err != nil {
		return err
	}
	if patN == nil {
		return nil
	}
	if patN.Kind != yaml.SequenceNode {
		return l.err(CodeBadValue, patN, "sanitize.patterns must be a list", "found a "+yamlpos.Kind(patN), "write each pattern as - {name: ..., regex: ...}")
	}
	if len(patN.Content) > MaxSanitizePatterns {
		return l.err(CodeBadValue, patN, fmt.Sprintf("sanitize.patterns has %d entries", len(patN.Content)),
			fmt.Sprintf("at most %d patterns run over every tool output", MaxSanitizePatterns), "merge patterns with alternation (a|b)")
	}
	names := map[string]bool{}
	for _, pn := range patN.Content {
		var sp SanitizePattern
		sp.Line = pn.Line
		var reN *yaml.Node
		if err := l.mapping(pn, "a sanitize pattern", sanitizePatternFields, func(key string, k, v *yaml.Node) error {
			s, err := l.scalar(v, "sanitize pattern "+key)
			if err != nil {
				return err
			}
			if key == "name" {
				if !nameRe.MatchString(s) {
					return l.err(CodeBadValue, v, fmt.Sprintf("bad sanitize pattern name %q", s), "names are letters, digits and _ . : -", "rename the pattern")
				}
				sp.Name = s
			} else {
				reN = v
			}
			return nil
		}); err != nil {
			return err
		}
		if sp.Name == "" || reN == nil {
			return l.err(CodeBadValue, pn, "a sanitize pattern needs a name and a regex", "the name appears in the redaction marker and the audit log", "write - {name: my-token, regex: 'tok_[a-z0-9]{20,}'}")
		}
		if names[sp.Name] {
			return l.err(CodeBadValue, pn, fmt.Sprintf("sanitize pattern name %q is used twice", sp.Name), "names identify patterns in redaction markers", "rename one of them")
		}
		names[sp.Name] = true
		re, err := regexp.Compile(reN.Value)
		if err != nil {
			return l.err(CodeBadValue, reN, fmt.Sprintf("sanitize pattern %q: bad regex", sp.Name), err.Error(), "write a Go (RE2) regular expression")
		}
		if re.MatchString("") {
			return l.err(CodeBadValue, reN, fmt.Sprintf("sanitize pattern %q matches the empty string", sp.Name),
				"it would match everywhere in every output", "require at least one character, e.g. + instead of *")
		}
		sp.Re = re
		l.p.Sanitize = append(l.p.Sanitize, sp)
	}
	return nil
}
