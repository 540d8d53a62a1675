package testbin

import (
	"debug/elf"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Concurrent requests for one package build it once and get one path;
// the binary is static; a different ldflags is a different build.
func TestBuildOncePerProcess(t *testing.T) {
	const pkg = "internal/testbin/testdata/hello"
	var wg sync.WaitGroup
	paths := make([]string, 8)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := Path(pkg)
			if err != nil {
				t.Error(err)
			}
			paths[i] = p
		}()
	}
	wg.Wait()
	for _, p := range paths[1:] {
		if p != paths[0] {
			t.Fatalf("one package, two binaries: %s and %s", paths[0], p)
		}
	}
	f, err := elf.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s is dynamically linked", paths[0])
		}
	}
	if filepath.Base(paths[0]) != "hello" {
		t.Errorf("binary named %s, want the package's last element", filepath.Base(paths[0]))
	}
	other := Build(t, pkg, LDFlags("-X main.greeting=hi"))
	if other == paths[0] {
		t.Fatal("a build with other ldflags reused the plain one")
	}
	dst := Into(t, pkg, filepath.Join(t.TempDir(), "copy"))
	if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("Into: %v %v", st, err)
	}
}

// A package that does not build is an error naming it, with go's output.
func TestBuildErrorNamesThePackage(t *testing.T) {
	_, err := Path("internal/testbin/testdata/nosuch")
	if err == nil || !strings.Contains(err.Error(), "go build internal/testbin/testdata/nosuch") || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("err = %v", err)
	}
}

// goBuild is a `go build` written into Go source: an exec of the go
// command with "build" as its first argument.
var goBuild = regexp.MustCompile(`"go",\s*"build"`)

// allowed are the files whose `go build` is the very thing they do or
// test, not the building of a test binary.
var allowed = []string{
	"cmd/fluffy/pluginnew.go",                       // `fluffy plugin new` builds the author's plugin
	"cmd/fluffy/pluginnew_test.go",                  // the author's own cgo build of the scaffold
	"builtin-plugins/tool-test/gocacheprog_test.go", // go's build through the cache program
	"pluginsdk/plugintest/runner_test.go",           // the build that fails from the author's module
}

// TestOnlyOneGoBuild: no Go file but this package's runs `go build`,
// so every test binary is built one way (static, once per process).
func TestOnlyOneGoBuild(t *testing.T) {
	root := Root()
	var found []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "bin" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasPrefix(rel, "internal/testbin/") || slices.Contains(allowed, rel) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if goBuild.Match(b) {
			found = append(found, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("these files run `go build` themselves; build test binaries with internal/testbin instead: %v", found)
	}
}
