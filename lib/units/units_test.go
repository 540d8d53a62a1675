package units

import (
	"errors"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"512", 512}, {"100KiB", 102400}, {"1MiB", 1 << 20}, {"2GiB", 2 << 30},
		{"100KB", 100000}, {"1MB", 1000000}, {"3GB", 3000000000},
	}
	for _, c := range good {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "1kib", "1kb", "1 KiB", "1.5MiB", "-1", "1B", "1TiB", "KiB", "10MiBs", "99999999999GiB", "0x10"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q): want error", in)
		} else if e := (*Error)(nil); !errors.As(err, &e) || e.Value != in {
			t.Errorf("ParseSize(%q): error %v does not name the value", in, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"100ms", 100 * time.Millisecond}, {"30s", 30 * time.Second}, {"5m", 5 * time.Minute}, {"2h", 2 * time.Hour}, {"0s", 0},
	}
	for _, c := range good {
		got, err := ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "30", "30S", "1.5s", "30sec", "1d", "ms", "1h30m", "-1s", "5Ms", "99999999999999h"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q): want error", in)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for in, want := range map[int64]string{102400: "100KiB", 1 << 20: "1MiB", 1000: "1000", 0: "0"} {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q want %q", in, got, want)
		}
	}
}
