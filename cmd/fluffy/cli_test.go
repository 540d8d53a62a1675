package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/manifests"
)

// cli runs fluffy in-process against a private $FLUFFY_HOME.
type cli struct {
	t    *testing.T
	home string
	vars map[string]string
}

func newCLI(t *testing.T) *cli {
	return &cli{t: t, home: t.TempDir(), vars: map[string]string{}}
}

func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	return c.runIn("", false, args...)
}

func (c *cli) runIn(stdin string, tty bool, args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	e := &env{
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		log:    hclog.NewNullLogger(),
		home:   c.home,
		getenv: func(k string) string { return c.vars[k] },
		isTTY:  tty,
	}
	code := run(args, e)
	return out.String(), errb.String(), code
}

// builtBins caches binaries built once per test process (TestMain).
var (
	builtBins   = map[string]string{}
	binCacheDir string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fluffy-cli-test")
	if err != nil {
		panic(err)
	}
	binCacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildOnce(t *testing.T, pkg string) string {
	t.Helper()
	if p, ok := builtBins[pkg]; ok {
		return p
	}
	out := filepath.Join(binCacheDir, strings.NewReplacer("/", "_", ".", "_").Replace(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	builtBins[pkg] = out
	return out
}

// buildPlugin builds the main package pkg (once per test process) and lays
// it out in a fresh directory together with its plugin.yaml, the sha256
// stamped in, and returns the directory.
func buildPlugin(t *testing.T, pkg, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifests.Parse(manifest, data)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, m.Entry)
	b, err := os.ReadFile(buildOnce(t, pkg))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := manifests.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	stamped, err := manifests.StampSHA256(data, sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), stamped, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
