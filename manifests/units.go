package manifests

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

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

var memoryRE = regexp.MustCompile(`^([0-9]+)(KiB|MiB|GiB|KB|MB|GB)?$`)

var memoryUnits = map[string]int64{
	"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	"KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000,
}

// ParseMemory parses a memory size: plain bytes or an integer followed by
// exactly one of KiB MiB GiB KB MB GB (no space, case-sensitive).
func ParseMemory(s string) (int64, error) {
	sm := memoryRE.FindStringSubmatch(s)
	if sm == nil {
		return 0, fmt.Errorf("%q is not a size: write an integer followed by KiB, MiB, GiB, KB, MB or GB (e.g. 512MiB), or plain bytes", s)
	}
	n, err := strconv.ParseInt(sm[1], 10, 64)
	mul := memoryUnits[sm[2]]
	if err != nil || n > math.MaxInt64/mul {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mul, nil
}

var timeoutRE = regexp.MustCompile(`^([0-9]+)(ms|s|m|h)$`)

var timeoutUnits = map[string]time.Duration{
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
}

// ParseTimeout parses a duration written as an integer followed by exactly
// one of ms, s, m, h (e.g. 120s). Compound forms like 1m30s are refused so a
// manifest has one obvious spelling.
func ParseTimeout(s string) (time.Duration, error) {
	sm := timeoutRE.FindStringSubmatch(s)
	if sm == nil {
		return 0, fmt.Errorf("%q is not a duration: write an integer followed by ms, s, m or h (e.g. 120s)", s)
	}
	n, err := strconv.ParseInt(sm[1], 10, 64)
	unit := timeoutUnits[sm[2]]
	if err != nil || n > int64(math.MaxInt64/unit) {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return time.Duration(n) * unit, nil
}

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
	v, err := ParseMemory(s)
	if err != nil {
		d.add(n, field, CodeBadUnit, err.Error(), "units are case-sensitive and must follow the number directly", "write e.g. memory: 512MiB")
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
	v, err := ParseTimeout(n.Value)
	if err != nil {
		d.add(n, field, CodeBadUnit, err.Error(), "", "write e.g. timeout: 120s")
		return 0
	}
	if v <= 0 || v > maxTimeout {
		d.add(n, field, CodeBadLimit, fmt.Sprintf("timeout %s is out of range", n.Value), "a sandbox timeout is more than 0 and at most 24h",
			"write e.g. timeout: 120s, or remove the line to use the template's limit")
		return 0
	}
	return v
}
