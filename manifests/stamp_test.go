package manifests

import (
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestStampSHA256(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	q := `"` + sum + `"`
	tests := []struct {
		name, in, want string
	}{
		{"double quoted", "name: x\nsha256: \"0000\"\nkind: tool\n", "name: x\nsha256: " + q + "\nkind: tool\n"},
		{"single quoted", "sha256: 'it''s'\n", "sha256: " + q + "\n"},
		{"plain", "sha256: deadbeef\n", "sha256: " + q + "\n"},
		{"empty", "name: x\nsha256:\nkind: tool\n", "name: x\nsha256: " + q + "\nkind: tool\n"},
		{"empty quotes and comment", "sha256: \"\"   # set by make build\n", "sha256: " + q + "   # set by make build\n"},
		{"null", "sha256: ~\n", "sha256: " + q + "\n"},
		{"crlf", "name: x\r\nsha256: \"\"\r\nkind: tool\r\n", "name: x\r\nsha256: " + q + "\r\nkind: tool\r\n"},
		{"last line without newline", "name: x\nsha256: old", "name: x\nsha256: " + q},
		{"unicode before", "description: \"héllo wörld\"\nsha256: \"\"\n", "description: \"héllo wörld\"\nsha256: " + q + "\n"},
		{"absent, after entry", "# c\nname: x\nentry: bin/x\nkind: tool\n", "# c\nname: x\nentry: bin/x\nsha256: " + q + "\nkind: tool\n"},
		{"absent, no entry", "name: x", "name: x\nsha256: " + q + "\n"},
		{"nested sha256 untouched", "tools:\n  - sha256: x\nsha256: y\n", "tools:\n  - sha256: x\nsha256: " + q + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StampSHA256([]byte(tt.in), sum)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			again, err := StampSHA256(got, sum)
			if err != nil || string(again) != string(got) {
				t.Errorf("stamping twice changed the file: %q, %v", again, err)
			}
		})
	}
	bad := []struct{ name, in, sum, code string }{
		{"bad sum", "sha256: x\n", "XYZ", CodeBadSHA256},
		{"upper-case sum", "sha256: x\n", strings.ToUpper(sum), CodeBadSHA256},
		{"flow root", "{name: x, sha256: y}\n", sum, CodeStampFailed},
		{"block scalar", "sha256: |\n  abc\n", sum, CodeStampFailed},
		{"list root", "- a\n", sum, CodeStampFailed},
		{"syntax error", "a: [\n", sum, CodeStampFailed},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := StampSHA256([]byte(tt.in), tt.sum); !uerr.HasCode(err, tt.code) {
				t.Errorf("want %s, got %v", tt.code, err)
			}
		})
	}
}

// TestStampedTestdataParses stamps every valid example with a new sum and
// checks that only the checksum changed.
func TestStampedTestdataParses(t *testing.T) {
	sum := strings.Repeat("12", 32)
	for _, dir := range []string{"tool-fs", "provider-openai", "runtime-docker", "vcs-git", "policy-audit", "minimal"} {
		m, err := Load("testdata/valid/" + dir)
		if err != nil {
			t.Fatal(err)
		}
		data := mustRead(t, m.Path)
		out, err := StampSHA256(data, sum)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Parse(m.Path, out)
		if err != nil {
			t.Fatalf("%s: stamped manifest invalid: %v", dir, err)
		}
		if m2.SHA256 != sum || m2.Name != m.Name || len(m2.Tools) != len(m.Tools) {
			t.Errorf("%s: stamp changed more than the sum: %+v", dir, m2)
		}
		if strings.ReplaceAll(string(out), sum, m.SHA256) != string(data) {
			t.Errorf("%s: bytes other than the sum changed", dir)
		}
	}
}
