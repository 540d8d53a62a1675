package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestCheckRunnable: a binary that cannot start in the empty L2 image
// (dynamically linked, or not an executable at all) is named as such with
// the static build as the fix; a static Go binary passes.
func TestCheckRunnable(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644)
	static := testbin.Build(t, "main.go", testbin.In(dir))
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755)
	if err := CheckRunnable("demo", script); err != nil {
		t.Errorf("CheckRunnable judges ELF files only: %v", err)
	}
	for _, c := range []struct {
		path, want string
	}{
		{static, ""},
		{"/bin/ls", "dynamically linked"}, // the host's own tools link libc
		{script, "not an ELF executable"},
	} {
		err := CheckELF("demo", c.path)
		if c.path == "/bin/ls" {
			if e2 := CheckRunnable("demo", c.path); e2 == nil {
				t.Errorf("CheckRunnable passed a dynamically linked binary")
			}
		}
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.path, err)
			}
			continue
		}
		ue, ok := uerr.As(err)
		if !ok || ue.Code != CodeNotRunnable || !strings.Contains(ue.What, c.want) || !strings.Contains(ue.Fix, "CGO_ENABLED=0") {
			t.Errorf("%s: %v", c.path, err)
		}
	}
}
