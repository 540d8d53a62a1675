package nearest

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	known := []string{"plugin", "policy", "session", "sandbox"}
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"plugin", 2, "plugin"},
		{"plugn", 2, "plugin"},
		{"polciy", 2, "policy"},
		{"sesion", 2, "session"},
		{"sandbx", 1, "sandbox"},
		{"xyz", 2, ""},
		{"pluginnn", 1, ""},
		{"", 2, ""},
		{strings.Repeat("p", 100), 200, ""},
	}
	for _, c := range cases {
		if got := Name(c.in, known, c.max); got != c.want {
			t.Errorf("Name(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"same", "same", 0},
	}
	for _, c := range cases {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
