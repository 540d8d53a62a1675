package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Option adjusts one build.
type Option func(*spec)

type spec struct {
	pkg     string
	dir     string
	ldflags string
	flags   []string
	env     []string
}

// LDFlags passes -ldflags (e.g. "-X main.marker=abc") to the build.
func LDFlags(s string) Option { return func(b *spec) { b.ldflags = s } }

// In runs the build in dir instead of this module's root: pkg is then
// resolved by the module (or the file list) found there.
func In(dir string) Option { return func(b *spec) { b.dir = dir } }

// Flags adds go build flags (e.g. "-buildvcs=false").
func Flags(f ...string) Option { return func(b *spec) { b.flags = append(b.flags, f...) } }

// Env adds environment variables to the build (e.g. "GOWORK=off").
func Env(kv ...string) Option { return func(b *spec) { b.env = append(b.env, kv...) } }

func (s spec) key() string {
	h := sha256.New()
	for _, p := range append([]string{s.pkg, s.dir, s.ldflags}, append(s.flags, s.env...)...) {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// name is the binary's file name: the package's last element.
func (s spec) name() string {
	n := strings.TrimSuffix(filepath.Base(strings.TrimSuffix(s.pkg, "/")), ".go")
	if n == "." || n == ".." || n == "/" || n == "" {
		return "bin"
	}
	return n
}

// entry is one build, done at most once.
type entry struct {
	once sync.Once
	path string
	err  error
}

// cache is the process's builds. It is the package's one piece of state:
// "once per test process" has to outlive any one test, and the packages
// that build share nothing else to hang it on.
var cache struct {
	sync.Mutex
	dir     string
	err     error
	entries map[string]*entry
}

// Root is this module's root directory, found from this file's location.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Path builds pkg (a directory relative to the module root, such as
// "internal/fixtures/tool-misbehave", unless In says otherwise) once per
// process and returns the binary's path. The binary is shared: a caller
// that changes or moves it must take a copy (Into). For TestMain and
// programs; tests call Build.
func Path(pkg string, opts ...Option) (string, error) {
	s := spec{pkg: pkg}
	for _, o := range opts {
		o(&s)
	}
	e, dir, err := lookup(s.key())
	if err != nil {
		return "", err
	}
	e.once.Do(func() { e.path, e.err = build(s, filepath.Join(dir, s.key())) })
	return e.path, e.err
}

// Dir is this process's directory for test binaries (made on first use),
// where callers may lay out what should live as long as the process.
func Dir() (string, error) {
	_, dir, err := lookup("")
	return dir, err
}

func lookup(key string) (*entry, string, error) {
	cache.Lock()
	defer cache.Unlock()
	if cache.dir == "" && cache.err == nil {
		cache.dir, cache.err = processDir()
		cache.entries = map[string]*entry{}
	}
	if cache.err != nil {
		return nil, "", cache.err
	}
	e, ok := cache.entries[key]
	if !ok {
		e = &entry{}
		cache.entries[key] = e
	}
	return e, cache.dir, nil
}

// processDir is this process's build directory, <tmp>/fluffy-testbin/<pid>;
// the directories of processes that have ended are removed first, so the
// binaries do not pile up (a test process has no hook that runs last).
func processDir() (string, error) {
	parent := filepath.Join(os.TempDir(), "fluffy-testbin-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("testbin: make the build directory: %w", err)
	}
	if ents, err := os.ReadDir(parent); err == nil {
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() || alive(pid) {
				continue
			}
			_ = os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
	dir := filepath.Join(parent, strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("testbin: make the build directory: %w", err)
	}
	// Sandboxed plugins run as other users: they must reach their binary.
	_ = os.Chmod(parent, 0o755)
	_ = os.Chmod(dir, 0o755)
	return dir, nil
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func build(s spec, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("testbin: %w", err)
	}
	out := filepath.Join(dir, s.name())
	args := append([]string{"build", "-o", out}, s.flags...)
	if s.ldflags != "" {
		args = append(args, "-ldflags", s.ldflags)
	}
	target := s.pkg
	if s.dir == "" && !filepath.IsAbs(target) && !strings.HasPrefix(target, ".") {
		target = "./" + target
	}
	cmd := exec.Command("go", append(args, target)...)
	cmd.Dir = s.dir
	if cmd.Dir == "" {
		cmd.Dir = Root()
	}
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local"), s.env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testbin: go build %s (in %s): %v\n%s", s.pkg, cmd.Dir, err, b)
	}
	return out, nil
}

// Build is Path for a test: a failed build fails tb.
func Build(tb testing.TB, pkg string, opts ...Option) string {
	tb.Helper()
	p, err := Path(pkg, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Into builds pkg once per process and copies the binary to dst (mode
// 0755, its directory made if need be), which the caller may change,
// stamp or lay out as a plugin; it returns dst.
func Into(tb testing.TB, pkg, dst string, opts ...Option) string {
	tb.Helper()
	if err := CopyTo(Build(tb, pkg, opts...), dst); err != nil {
		tb.Fatal(err)
	}
	return dst
}

// IntoE is Into for TestMain and programs.
func IntoE(pkg, dst string, opts ...Option) error {
	p, err := Path(pkg, opts...)
	if err != nil {
		return err
	}
	return CopyTo(p, dst)
}

// CopyTo copies the binary at src to dst, creating dst's directory.
func CopyTo(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("testbin: %w", err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("testbin: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("testbin: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("testbin: copy %s: %w", src, err)
	}
	return out.Close()
}
