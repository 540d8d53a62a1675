package kernel

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

func TestToolchainsFromPolicy(t *testing.T) {
	def, err := policy.Default()
	if err != nil {
		t.Fatal(err)
	}
	tcs, err := toolchains(def, "/nonexistent-home", "/nonexistent-project", "", "", hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("default policy: %v", err)
	}
	found := false
	for _, tc := range tcs {
		if _, err := os.Stat(tc.Path); err != nil {
			t.Errorf("%s is mounted but absent", tc.Path)
		}
		found = found || tc.Path == runtime.GOROOT()
	}
	if runtime.GOROOT() == "/usr/local/go" && !found {
		t.Errorf("the default policy does not give this machine's Go: %+v", tcs)
	}

	// Outside /tmp, which toolchains may not touch for another reason.
	base, err := os.MkdirTemp(outsideTmp(t), "tc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	base, _ = filepath.Abs(base)
	project, home := filepath.Join(base, "project"), filepath.Join(base, "home", "fluffy")
	for _, c := range []struct{ name, path string }{
		{"the project", project},
		{"inside the project", filepath.Join(project, "vendor")},
		{"a parent of $FLUFFY_HOME", filepath.Dir(home)},
	} {
		os.MkdirAll(c.path, 0o755)
		p, err := policy.Load("p.yaml", []byte("version: 1\ntoolchains:\n  - path: "+c.path+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = toolchains(p, home, project, "", "", hclog.NewNullLogger())
		if !uerr.HasCode(err, "POLICY_TOOLCHAINS_INVALID") || !strings.Contains(err.Error(), "p.yaml") || !strings.Contains(err.Error(), "overlaps") {
			t.Errorf("%s: want POLICY_TOOLCHAINS_INVALID naming the file, got %v", c.name, err)
		}
	}
	if a, b := BuildCacheDir("/h", "/p/x"), BuildCacheDir("/h", "/p/x/"); a != b || !strings.HasPrefix(a, "/h/cache/") || a == BuildCacheDir("/h", "/p/y") {
		t.Errorf("cache dirs: %s %s", a, b)
	}
}

// outsideTmp is a base directory for test trees that must not lie under
// /tmp (a path sandboxes reserve): the package directory, or /var/tmp when
// the checkout itself is under /tmp.
func outsideTmp(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if wd == "/tmp" || strings.HasPrefix(wd, "/tmp/") {
		return "/var/tmp"
	}
	return "."
}
