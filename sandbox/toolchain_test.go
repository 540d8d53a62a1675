package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func section(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

func TestParseToolchains(t *testing.T) {
	// Not under /tmp: a toolchain there would hide the sandbox's /tmp.
	home, err := os.MkdirTemp(outsideTmp(t), "home")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	home, _ = filepath.Abs(home)
	os.MkdirAll(filepath.Join(home, "go", "pkg", "mod"), 0o755)
	tc, skipped, err := ParseToolchains(section(t, `
- path: /usr
- path: ~/go/pkg/mod
  env: GOMODCACHE
- path: /usr/
- path: /no/such/toolchain
`), home, "")

	if err != nil {
		t.Fatal(err)
	}
	want := []Toolchain{{Path: "/usr"}, {Path: filepath.Join(home, "go/pkg/mod"), Env: "GOMODCACHE"}}
	if !slices.Equal(tc, want) || !slices.Equal(skipped, []string{"/no/such/toolchain"}) {
		t.Fatalf("got %+v skipped %v", tc, skipped)
	}
	for _, bad := range []string{
		`[{path: relative/dir}]`, `[{path: /}]`, `[{path: /workspace}]`, `[{path: /etc/ssl}]`, `[{path: /run}]`,
		`[{path: /cache/x}]`, `[{path: /usr, env: "1X"}]`, `[{path: /usr, env: PATH}]`, `[{path: /usr, env: FLUFFY_X}]`,
		`{path: /usr}`, `[{path: /usr, extra: 1}]`,
	} {
		if _, _, err := ParseToolchains(section(t, bad), home, ""); !uerr.HasCode(err, "POLICY_TOOLCHAINS_INVALID") {
			t.Errorf("%s: want POLICY_TOOLCHAINS_INVALID, got %v", bad, err)
		}
	}
	if _, _, err := ParseToolchains(section(t, `[{path: ~/x}]`), "", ""); !uerr.HasCode(err, "POLICY_TOOLCHAINS_INVALID") {
		t.Errorf("~ without a home: %v", err)
	}
}

func TestCodeMountsOnlyWhereCodeRuns(t *testing.T) {
	spec := LaunchSpec{Toolchains: []Toolchain{{Path: "/usr"}}, BuildCache: "/x/cache"}
	ts := Templates()
	if got := codeMounts(ts["code-executor"], spec); len(got.Toolchains) != 1 || got.BuildCache == "" {
		t.Fatalf("code-executor lost its mounts: %+v", got)
	}
	for _, name := range []string{"ai-provider", "policy-sandbox"} {
		if got := codeMounts(ts[name], spec); got.Toolchains != nil || got.BuildCache != "" {
			t.Errorf("%s got code mounts: %+v", name, got)
		}
	}
	gv := ts["code-executor"]
	gv.OCIRuntime = "runsc"
	if got := codeMounts(gv, spec); got.BuildCache != "" || len(got.Toolchains) != 1 {
		t.Fatalf("under gVisor the cache must not be mounted: %+v", got)
	}
}

func TestToolchainEnv(t *testing.T) {
	goroot := runtime.GOROOT()
	env := toolchainEnv([]Toolchain{{Path: goroot}, {Path: "/usr"}, {Path: t.TempDir(), Env: "GOMODCACHE"}}, GuestCache)
	joined := strings.Join(env, "\n")
	if !strings.Contains(joined, "PATH="+filepath.Join(goroot, "bin")+":/usr/bin") || !strings.Contains(joined, "GOMODCACHE=") || !strings.Contains(joined, EnvBuildCache+"="+GuestCache) {
		t.Fatalf("env: %q", env)
	}
}

// TestCodeExecutorMounts runs the fixture in a real code-executor
// container with a toolchain and a build cache: the toolchain is there,
// read-only, on PATH; the cache is writable and lands on the host; /tmp
// can run a binary. The same spec in policy-sandbox gets none of it.
func TestCodeExecutorMounts(t *testing.T) {
	needDocker(t)
	goroot := runtime.GOROOT()
	cache := filepath.Join(t.TempDir(), "cache")
	spec := newSpec(t, "code-executor")
	spec.Toolchains = []Toolchain{{Path: goroot}}
	spec.BuildCache = cache
	r := launch(t, tenv.containers, spec)
	env := mustCall(t, r, "env", nil).Data
	if !strings.Contains(env, "PATH="+goroot+"/bin") || !strings.Contains(env, EnvBuildCache+"=/cache") {
		t.Fatalf("env in the sandbox: %s", env)
	}
	if got := mustCall(t, r, "exec", map[string]any{"path": goroot + "/bin/go"}); !got.OK || !strings.Contains(got.Data, "go version") {
		t.Fatalf("toolchain not runnable: %+v", got)
	}
	if got := mustCall(t, r, "write_file", map[string]any{"path": goroot + "/pwned"}); got.OK {
		t.Fatal("the toolchain mount is writable")
	}
	// A copy of the fixture itself, run from /tmp without go-plugin's
	// cookie: it starts and says it is a plugin (noexec would refuse it).
	if got := mustCall(t, r, "exec", map[string]any{"path": "/plugin/hostile", "text": "/tmp/copy"}); !strings.Contains(got.Data, "This binary is a plugin") {
		t.Fatalf("cannot run a binary from /tmp: %+v", got)
	}
	if got := mustCall(t, r, "write_file", map[string]any{"path": "/cache/entry"}); !got.OK {
		t.Fatalf("cache not writable: %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "entry")); err != nil || string(b) != "pwned\n" {
		t.Fatalf("cache write did not reach the host: %v", err)
	}

	other := newSpec(t, "policy-sandbox")
	other.Toolchains = []Toolchain{{Path: goroot}}
	other.BuildCache = filepath.Join(t.TempDir(), "cache2")
	r2 := launch(t, tenv.containers, other)
	if got := mustCall(t, r2, "read_file", map[string]any{"path": goroot + "/VERSION"}); got.OK {
		t.Fatal("policy-sandbox sees the toolchain")
	}
	if got := mustCall(t, r2, "write_file", map[string]any{"path": "/cache/entry"}); got.OK {
		t.Fatal("policy-sandbox can write a cache")
	}
	if _, err := os.Stat(other.BuildCache); err == nil {
		t.Fatal("a cache directory was made for a template that runs no code")
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
