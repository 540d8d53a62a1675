package plugintest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A plugin author's module requires fluffy (a replace to a checkout, as
// `fluffy plugin new` writes it) and its go.sum lists only what the
// author's code links: not the kernel's dependencies. The suite runner
// still builds — in fluffy's module — and runs.
func TestRunnerBuildsWithoutTheKernelInTheAuthorsGoSum(t *testing.T) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	author := t.TempDir()
	gomod := "module example.com/author\n\ngo 1.26.0\n\nrequire " + fluffyModule + " v0.0.0\n\nreplace " + fluffyModule + " => " + strings.TrimSpace(string(root)) + "\n"
	if err := os.WriteFile(filepath.Join(author, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	// The case is real: building the runner from the author's module
	// fails for want of the kernel's go.sum entries.
	direct := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "x"), fluffyModule+"/"+runnerDir)
	direct.Dir = author
	direct.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	if b, err := direct.CombinedOutput(); err == nil || !strings.Contains(string(b), "go.sum") {
		t.Fatalf("building from the author's module: err %v, output %s; want a missing go.sum entry", err, b)
	}
	bin := buildRunner(t, author)
	err = exec.Command(bin).Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("the runner without arguments: %v, want its usage exit status 2", err)
	}
}
