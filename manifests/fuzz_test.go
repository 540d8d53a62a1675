package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// FuzzParse: Parse never panics; it returns either a manifest that
// re-validates (and survives re-stamping) or an error that is a uerr whose
// every problem names the file, a line and a fix.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/valid/*/plugin.yaml")
	more, _ := filepath.Glob("testdata/invalid/*.yaml")
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz/plugin.yaml"
		m, err := Parse(file, data)
		if err != nil {
			if m != nil {
				t.Fatal("both a manifest and an error")
			}
			u, ok := uerr.As(err)
			if !ok || u.Code != CodeInvalid {
				t.Fatalf("error is not a MANIFEST_INVALID uerr: %T %v", err, err)
			}
			ps := Problems(err)
			if len(ps) == 0 {
				t.Fatalf("no problems listed: %v", err)
			}
			for _, p := range ps {
				if p.File != file || p.Line < 1 || p.Code == "" || p.What == "" || p.Fix == "" {
					t.Fatalf("incomplete problem %+v", p)
				}
				if !uerr.HasCode(err, p.Code) {
					t.Fatalf("uerr.HasCode misses %s", p.Code)
				}
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("parsed manifest does not re-validate: %v", err)
		}
		if !nameRE.MatchString(m.Name) || !sha256RE.MatchString(m.SHA256) || m.SemVer == nil || len(m.APIVersions) == 0 ||
			DefaultTemplate(m.Kind) == "" || m.Sandbox.Template == "" || containsDotDot(m.Entry) || strings.HasPrefix(m.Entry, "/") {
			t.Fatalf("accepted an invalid manifest: %+v", m)
		}
		if m.Kind == KindTool {
			for _, tl := range m.Tools {
				if tl.schema == nil || tl.OutputMode == "" || tl.Lifetime == "" {
					t.Fatalf("tool not fully loaded: %+v", tl)
				}
				_ = tl.ValidateArgs([]byte(`{}`))
			}
		}
		sum := strings.Repeat("fe", 32)
		if out, err := StampSHA256(data, sum); err == nil {
			m2, err := Parse(file, out)
			if err != nil {
				t.Fatalf("stamped manifest no longer parses: %v\n%q", err, out)
			}
			if m2.SHA256 != sum || m2.Name != m.Name || len(m2.Tools) != len(m.Tools) {
				t.Fatalf("stamping changed more than the sum: %+v", m2)
			}
		}
	})
}
