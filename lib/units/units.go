package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Error describes a value that is not in a supported notation.
type Error struct {
	Value string
	Kind  string // "size" or "duration"
	Why   string
}

func (e *Error) Error() string { return fmt.Sprintf("bad %s %q: %s", e.Kind, e.Value, e.Why) }

// SizeHelp and DurationHelp list the accepted notations, for error fixes.
const (
	SizeHelp     = `a whole number of bytes, or a whole number followed by KiB, MiB, GiB (1024-based) or KB, MB, GB (1000-based), e.g. "100KiB"`
	DurationHelp = `a whole number followed by ms, s, m or h, e.g. "30s"`
)

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
}

// ParseSize parses a size. Plain digits are bytes.
func ParseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := parseWhole(num)
	if err != nil {
		return 0, &Error{Value: s, Kind: "size", Why: err.Error()}
	}
	if n > math.MaxInt64/mult {
		return 0, &Error{Value: s, Kind: "size", Why: "too large"}
	}
	return n * mult, nil
}

var durationUnits = []struct {
	suffix string
	mult   time.Duration
}{
	{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour},
}

// ParseDuration parses a duration; a unit is required.
func ParseDuration(s string) (time.Duration, error) {
	for _, u := range durationUnits {
		if !strings.HasSuffix(s, u.suffix) {
			continue
		}
		num := strings.TrimSuffix(s, u.suffix)
		if u.suffix == "s" && strings.HasSuffix(num, "m") {
			continue // "ms" was checked first; "5ms" never reaches here
		}
		n, err := parseWhole(num)
		if err != nil {
			return 0, &Error{Value: s, Kind: "duration", Why: err.Error()}
		}
		if n > int64(math.MaxInt64/u.mult) {
			return 0, &Error{Value: s, Kind: "duration", Why: "too large"}
		}
		return time.Duration(n) * u.mult, nil
	}
	if _, err := parseWhole(s); err == nil {
		return 0, &Error{Value: s, Kind: "duration", Why: "a unit is required (ms, s, m or h)"}
	}
	return 0, &Error{Value: s, Kind: "duration", Why: "unknown unit (units are case-sensitive: ms, s, m, h)"}
}

func parseWhole(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("missing number")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("not a whole number followed by a known unit")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("too large")
	}
	return n, nil
}

// FormatSize renders n in the largest IEC unit that divides it exactly.
func FormatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}
