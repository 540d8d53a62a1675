package policy

import (
	_ "embed"
	"fmt"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultName names the embedded default policy in messages.
const DefaultName = "(embedded default policy.yaml)"

// DefaultYAML returns a copy of the default policy's text.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Default loads the embedded default policy. It cannot fail in a released
// binary (a test loads it); an error here is a build defect.
func Default() (*Policy, error) {
	p, err := Load(DefaultName, defaultYAML)
	if err != nil {
		return nil, fmt.Errorf("load embedded default policy: %w", err)
	}
	return p, nil
}
