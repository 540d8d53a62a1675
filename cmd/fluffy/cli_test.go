package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
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
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	bin := testbin.Into(t, pkg, filepath.Join(dir, m.Entry), testbin.In(wd))
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
