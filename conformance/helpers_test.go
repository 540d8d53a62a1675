package conformance_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// Binaries are built once per test process (TestMain) and copied under each
// personality's name.
var bins struct {
	dir      string
	broken   string
	toolFS   string
	wordcnt  string
	adapter  string
	stub     string
	buildErr error
}

func TestMain(m *testing.M) {
	// The test binary doubles as the stub kernel of CORE-SHUTDOWN-002.
	if len(os.Args) > 1 && os.Args[1] == "stub-kernel" {
		if err := conformance.StubKernelMain(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	dir, err := os.MkdirTemp("", "fluffy-conformance-bins-")
	if err != nil {
		panic(err)
	}
	bins.dir = dir
	build := func(pkg, name string) string {
		out := filepath.Join(dir, name)
		if err := testbin.IntoE(pkg, out); err != nil && bins.buildErr == nil {
			bins.buildErr = err
		}
		return out
	}
	bins.broken = build("internal/fixtures/any-broken", "broken")
	bins.toolFS = build("builtin-plugins/tool-fs", "tool-fs")
	bins.wordcnt = build("pluginsdk/examples/wordcount", "wordcount")
	// Static, so the runtime profile can also run it inside its containers.
	bins.stub = build("conformance/cmd/stubkernel", "stubkernel")
	if _, err := exec.LookPath("docker"); err == nil {
		bins.adapter = build("builtin-plugins/runtime-docker", "runtime-docker")
	}
	code := m.Run()
	l2.close()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// l2 is the container launcher shared by every run of the process.
type l2State struct {
	once   sync.Once
	l      *conformance.L2
	reason string
	err    error
}

func (x *l2State) close() { x.l.Close() }

var l2 l2State

// options returns runner options: stub kernel = this test binary, and the
// L2 launcher when Docker is usable (required with FLUFFY_REQUIRE_DOCKER=1).
func options(t testing.TB, startTimeout time.Duration) conformance.Options {
	t.Helper()
	if bins.buildErr != nil {
		t.Fatal(bins.buildErr)
	}
	o := conformance.Options{StubKernel: []string{bins.stub}, StartTimeout: startTimeout}
	l2.once.Do(func() {
		getenv := func(k string) string {
			if k == "FLUFFY_RUNTIME_ADAPTER" && bins.adapter != "" {
				return bins.adapter
			}
			return os.Getenv(k)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		l2.l, l2.reason, l2.err = conformance.OpenL2(ctx, getenv, nil)
	})
	switch {
	case l2.err != nil && os.Getenv(conformance.EnvRequireDocker) != "":
		t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but the L2 runtime failed: %v", l2.err)
	case l2.l == nil && os.Getenv(conformance.EnvRequireDocker) != "":
		t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but the L2 runtime is unavailable: %s", l2.reason)
	case l2.l != nil:
		o.Sandbox = l2.l.Launcher
	default:
		o.SandboxReason = l2.reason
		if l2.err != nil {
			o.SandboxReason = l2.err.Error()
		}
	}
	return o
}

// needDocker skips a test that needs the Docker engine and the
// runtime-docker build when they are absent, and fails it instead when
// FLUFFY_REQUIRE_DOCKER is set.
func needDocker(t testing.TB) {
	t.Helper()
	reason := ""
	if bins.adapter == "" {
		reason = "the docker CLI is not installed (runtime-docker was not built)"
	} else if _, err := os.Stat(sandbox.EngineSocketFromEnv(os.Getenv)); err != nil {
		reason = "no Docker engine socket: " + err.Error()
	}
	if reason == "" {
		return
	}
	if os.Getenv(conformance.EnvRequireDocker) != "" {
		t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but %s", reason)
	}
	t.Skip(reason)
}

const fixtureTools = `tools:
  - name: fx.read
    summary: "read a project file"
    parameters: {type: object, properties: {path: {type: string, minLength: 1}}, required: [path], additionalProperties: false}
    output_mode: full
  - name: fx.write
    summary: "propose a file's new content"
    parameters: {type: object, properties: {path: {type: string, minLength: 1}, content: {type: string}}, required: [path, content], additionalProperties: false}
    output_mode: patch
`

// fixture lays out a plugin directory for personality name: the broken
// binary copied as <name>, and a stamped plugin.yaml. edit may rewrite the
// manifest text before stamping; sum, if set, replaces the real sha256.
func fixture(t *testing.T, name string, edit func(string) string, sum string) string {
	t.Helper()
	kind, _, _ := strings.Cut(name, "-")
	if kind == "manifest" {
		kind = "tool"
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, bins.broken, filepath.Join(dir, name))
	y := fmt.Sprintf("name: %s\nversion: 1.0.0\nkind: %s\ndescription: conformance fixture\nauthor: fluffy tests\nentry: %s\nsha256: \"%s\"\napi_versions: [1, 2]\ntags: [third_party]\n",
		name, kind, name, strings.Repeat("0", 64))
	switch kind {
	case "tool":
		y += fixtureTools
	case "provider":
		y += "required_capabilities: [net.connect]\nprovider:\n  network: [\"api.example.com:443\"]\n"
	}
	if edit != nil {
		y = edit(y)
	}
	if sum == "" {
		s, err := manifests.FileSHA256(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sum = s
	}
	y = strings.Replace(y, strings.Repeat("0", 64), sum, 1)
	if err := os.WriteFile(filepath.Join(dir, manifests.FileName), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// builtin lays out a real plugin (binary + its own plugin.yaml, stamped).
func builtin(t testing.TB, bin, manifest string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(bin))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, bin, filepath.Join(dir, filepath.Base(bin)))
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := manifests.FileSHA256(filepath.Join(dir, filepath.Base(bin)))
	if err != nil {
		t.Fatal(err)
	}
	data, err = manifests.StampSHA256(data, sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, manifests.FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
