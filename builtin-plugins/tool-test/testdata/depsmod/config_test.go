package depsmod

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLoad(t *testing.T) {
	cases := []struct {
		name, in string
		want     int
		err      string
	}{
		{"two", "- {name: a, port: 80}\n- {name: b, port: 443}\n", 2, ""},
		{"empty", "[]\n", 0, ""},
		{"bad port", "- {name: a, port: 0}\n", 0, "out of range"},
		{"not yaml", "- [\n", 0, "services"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			s, err := Load([]byte(c.in), hclog.New(&hclog.LoggerOptions{Output: &out}))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || len(s) != c.want || strings.Count(out.String(), "service:") != c.want {
				t.Fatalf("%v %v %q", s, err, out.String())
			}
		})
	}
}

func TestDumpRoundTrip(t *testing.T) {
	in := []Service{{"a", 1}, {"b", 2}}
	b, err := Dump(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Load(b, hclog.NewNullLogger())
	if err != nil || len(out) != 2 || out[1] != in[1] {
		t.Fatalf("%v %v\n%s", out, err, b)
	}
}
