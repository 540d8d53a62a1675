package manifests

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/units"
)

// Sizes and durations are parsed by lib/units, the one unit parser of
// fluffy (policy files and manifests use the same notation).

// Limits on sandbox overrides. They only reject nonsense; whether a plugin
// may have what it asks for is the policy's decision.
const (
	// MinMemoryBytes is the smallest memory limit container runtimes accept
	// (Docker refuses less than 6 MiB).
	MinMemoryBytes = 6 << 20
	maxCPUs        = 1024
	maxPids        = 1 << 22
	maxTimeout     = 24 * time.Hour
)

func (d *decoder) memory(n *yaml.Node, field string) int64 {
	var s string
	switch {
	case n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!str"):
		s = n.Value
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		d.noValue(n, field)
		return 0
	default:
		d.add(n, field, CodeWrongType, "expected a memory size, found "+describe(n), "", "write e.g. memory: 512MiB")
		return 0
	}
	v, err := units.ParseSize(s)
	if err != nil {
		d.add(n, field, CodeBadUnit, err.Error(), "units are case-sensitive and must follow the number directly", "write "+units.SizeHelp)
		return 0
	}
	if v < MinMemoryBytes {
		d.add(n, field, CodeBadLimit, fmt.Sprintf("memory %s is below the minimum of 6MiB", s),
			"container runtimes refuse smaller limits", "write e.g. memory: 64MiB, or remove the line to use the template's limit")
		return 0
	}
	return v
}

func (d *decoder) timeout(n *yaml.Node, field string) time.Duration {
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int":
		d.add(n, field, CodeBadUnit, fmt.Sprintf("timeout %s has no unit", n.Value), "a bare number could mean seconds or milliseconds",
			fmt.Sprintf("add a unit: timeout: %ss", n.Value))
		return 0
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		d.noValue(n, field)
		return 0
	default:
		d.add(n, field, CodeWrongType, "expected a duration, found "+describe(n), "", "write e.g. timeout: 120s")
		return 0
	}
	v, err := units.ParseDuration(n.Value)
	if err != nil {
		d.add(n, field, CodeBadUnit, err.Error(), "units are case-sensitive and must follow the number directly", "write "+units.DurationHelp)
		return 0
	}
	if v <= 0 || v > maxTimeout {
		d.add(n, field, CodeBadLimit, fmt.Sprintf("timeout %s is out of range", n.Value), "a sandbox timeout is more than 0 and at most 24h",
			"write e.g. timeout: 120s, or remove the line to use the template's limit")
		return 0
	}
	return v
}
