package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// binDir holds the fixture and tool-fs binaries built once for this package.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fluffy-supervisor-test")
	if err != nil {
		panic(err)
	}
	binDir = dir
	for name, pkg := range map[string]string{"fixture": "internal/fixtures/tool-misbehave", "tool-fs": "builtin-plugins/tool-fs"} {
		if err := testbin.IntoE(pkg, filepath.Join(dir, name)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func fileSum(t testing.TB, p string) string {
	sum, err := manifests.FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// fixture copies the fixture binary under a personality name.
func fixture(t testing.TB, personality string) (path, sum string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), personality)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p, fileSum(t, p)
}

type harness struct {
	sup       *Supervisor
	workspace string
	now       *fakeClock
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newHarness(t testing.TB, mod func(*Options)) *harness {
	t.Helper()
	ws := t.TempDir()
	clock := &fakeClock{t: time.Now()}
	o := Options{
		Logger:       hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}),
		Launcher:     sandbox.Subprocess{},
		StartTimeout: 5 * time.Second,
		Workspace:    ws,
		OutRoot:      t.TempDir(),
		Now:          clock.Now,
		// No waiting between restarts in tests; the breaker logic is what matters.
		RestartBackoff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
	}
	if mod != nil {
		mod(&o)
	}
	s := New(o)
	t.Cleanup(s.Close)
	return &harness{sup: s, workspace: ws, now: clock}
}

func fixtureSpec(t testing.TB, personality string, versions []int) Spec {
	p, sum := fixture(t, personality)
	return Spec{Name: "fixture", Version: "1.0.0", Kind: base.KindTool, Binary: p, SHA256: sum, APIVersions: versions}
}

func echo(t *testing.T, s *Supervisor, name string) (tool.Result, error) {
	t.Helper()
	return s.CallTool(context.Background(), name, tool.Call{ID: "1", Tool: "fx.echo", Args: json.RawMessage(`{"hi":1}`)}, nil)
}

func TestNegotiation(t *testing.T) {
	cases := []struct {
		name        string
		personality string
		manifest    []int
		wantVersion int
		wantCode    string
		atHandshake bool
		launched    bool
	}{
		{"v1+v2 negotiates 2", "good", []int{1, 2}, 2, "", false, true},
		{"v1-only still works", "v1only", []int{1}, 1, "", false, true},
		{"v3-only rejected before launch", "v3only", []int{3}, 0, CodeAPIVersion, false, false},
		{"v3-only lying manifest caught at handshake", "v3only", []int{1, 2}, 0, CodeAPIVersion, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			spec := fixtureSpec(t, c.personality, c.manifest)
			err := h.sup.Add(spec)
			if err == nil {
				_, err = echo(t, h.sup, "fixture")
			}
			_, statErr := os.Stat(filepath.Join(h.workspace, "started-"+c.personality))
			if launched := statErr == nil; launched != c.launched {
				t.Fatalf("binary launched=%v, want %v", launched, c.launched)
			}
			if c.wantCode != "" {
				if !uerr.HasCode(err, c.wantCode) {
					t.Fatalf("want %s, got %v", c.wantCode, err)
				}
				var ave *APIVersionError
				if !errors.As(err, &ave) {
					t.Fatalf("want *APIVersionError, got %T", err)
				}
				if ave.AtHandshake != c.atHandshake || ave.KernelMin != 1 || ave.KernelMax != 2 || len(ave.PluginVersions) == 0 || ave.PluginVersions[0] != 3 {
					t.Fatalf("error fields: %+v", ave)
				}
				if msg := err.Error(); !strings.Contains(msg, "[1,2]") || !strings.Contains(msg, "fixture") {
					t.Fatalf("message must name the plugin and the range [1,2]: %s", msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, _ := h.sup.Stats("fixture")
			if st.APIVersion != c.wantVersion {
				t.Fatalf("negotiated %d, want %d", st.APIVersion, c.wantVersion)
			}
		})
	}
}

func TestStartFailures(t *testing.T) {
	cases := []struct {
		name        string
		personality string
		mutate      func(*Spec)
		code        string
		launched    bool
	}{
		{"wrong magic cookie", "badcookie", nil, CodeHandshakeFailed, true},
		{"checksum mismatch refused before exec", "good", func(s *Spec) { s.SHA256 = fmt.Sprintf("%064x", 1) }, CodeChecksum, false},
		{"stdout before handshake", "stdout", nil, CodeHandshakeGarbled, true},
		{"never completes handshake", "hang", nil, CodeStartTimeout, true},
		{"crash at start", "crashstart", nil, CodeHandshakeFailed, true},
		{"info contradicts manifest", "liar", nil, CodeInfoMismatch, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.StartTimeout = 700 * time.Millisecond })
			spec := fixtureSpec(t, c.personality, []int{1, 2})
			if c.mutate != nil {
				c.mutate(&spec)
			}
			if err := h.sup.Add(spec); err != nil {
				t.Fatal(err)
			}
			_, err := echo(t, h.sup, "fixture")
			if !uerr.HasCode(err, c.code) {
				t.Fatalf("want %s, got %v", c.code, err)
			}
			ue, _ := uerr.As(err)
			if ue.What == "" || ue.Why == "" || ue.Fix == "" {
				t.Fatalf("error is not what/why/fix complete: %+v", ue)
			}
			_, statErr := os.Stat(filepath.Join(h.workspace, "started-"+c.personality))
			if launched := statErr == nil; launched != c.launched {
				t.Fatalf("binary launched=%v, want %v", launched, c.launched)
			}
		})
	}
}

func TestCrashInCallRestarts(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.sup.Add(fixtureSpec(t, "good", []int{1, 2})); err != nil {
		t.Fatal(err)
	}
	if _, err := echo(t, h.sup, "fixture"); err != nil {
		t.Fatal(err)
	}
	first, _ := h.sup.Stats("fixture")
	for _, toolName := range []string{"fx.panic", "fx.exit"} {
		_, err := h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "2", Tool: toolName}, nil)
		if !uerr.HasCode(err, CodeCrashed) {
			t.Fatalf("%s: want %s, got %v", toolName, CodeCrashed, err)
		}
		// The kernel keeps going: the next call restarts the plugin.
		r, err := echo(t, h.sup, "fixture")
		if err != nil || !r.OK {
			t.Fatalf("after %s: %v %+v", toolName, err, r)
		}
	}
	st, _ := h.sup.Stats("fixture")
	if st.Restarts != 2 || st.InstanceID == first.InstanceID || !st.Running {
		t.Fatalf("stats after crashes: %+v (first %+v)", st, first)
	}
}

func TestBreakerOpensAfterFiveCrashes(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.sup.Add(fixtureSpec(t, "good", []int{1, 2})); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_, err := h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "x", Tool: "fx.panic"}, nil)
		if !uerr.HasCode(err, CodeCrashed) {
			t.Fatalf("crash %d: %v", i+1, err)
		}
	}
	_, err := echo(t, h.sup, "fixture")
	if !uerr.HasCode(err, CodeCircuitOpen) {
		t.Fatalf("after 5 crashes want %s, got %v", CodeCircuitOpen, err)
	}
	h.now.Add(29 * time.Second)
	if _, err := echo(t, h.sup, "fixture"); !uerr.HasCode(err, CodeCircuitOpen) {
		t.Fatalf("breaker closed too early: %v", err)
	}
	h.now.Add(2 * time.Second)
	if r, err := echo(t, h.sup, "fixture"); err != nil || !r.OK {
		t.Fatalf("breaker should close after 30s: %v", err)
	}
}

func TestStartFailuresCountTowardBreaker(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.StartTimeout = 500 * time.Millisecond })
	if err := h.sup.Add(fixtureSpec(t, "crashstart", []int{1, 2})); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := echo(t, h.sup, "fixture"); !uerr.HasCode(err, CodeHandshakeFailed) {
			t.Fatalf("want handshake failure, got %v", err)
		}
	}
	if _, err := echo(t, h.sup, "fixture"); !uerr.HasCode(err, CodeCircuitOpen) {
		t.Fatalf("want open breaker, got %v", err)
	}
}

func TestCallDeadlineKillsAndRestarts(t *testing.T) {
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			h := newHarness(t, nil)
			personality := "good"
			if v == 1 {
				personality = "v1only"
			}
			spec := fixtureSpec(t, personality, []int{v})
			spec.Limits.Timeout = 400 * time.Millisecond
			if err := h.sup.Add(spec); err != nil {
				t.Fatal(err)
			}
			_, err := h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "s", Tool: "fx.sleep", Args: json.RawMessage(`{"ignore_cancel":true}`)}, nil)
			if !uerr.HasCode(err, CodeCallTimeout) {
				t.Fatalf("want %s, got %v", CodeCallTimeout, err)
			}
			if r, err := echo(t, h.sup, "fixture"); err != nil || !r.OK {
				t.Fatalf("after timeout: %v", err)
			}
			if st, _ := h.sup.Stats("fixture"); st.Restarts != 1 {
				t.Fatalf("restarts = %d, want 1", st.Restarts)
			}
		})
	}
}

func TestV2ProgressAndCancel(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.sup.Add(fixtureSpec(t, "good", []int{1, 2})); err != nil {
		t.Fatal(err)
	}
	var got []tool.Progress
	r, err := h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "p", Tool: "fx.progress"}, func(p tool.Progress) { got = append(got, p) })
	if err != nil || !r.OK {
		t.Fatal(err)
	}
	// Coalesced (at most one per 100 ms): the first and the last always
	// arrive.
	if n := len(got); n < 2 || n > 3 || got[0].Message != "step 1" || got[n-1].Message != "step 3" || got[n-1].Fraction != 1 {
		t.Fatalf("progress events: %+v", got)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel(errors.New("user pressed Ctrl-C")) }()
	r, err = h.sup.CallTool(ctx, "fixture", tool.Call{ID: "c", Tool: "fx.sleep"}, nil)
	if err != nil {
		t.Fatalf("cancelled v2 call should return the plugin's result, got %v", err)
	}
	if !r.Cancelled || !strings.Contains(string(r.Output), "user pressed Ctrl-C") {
		t.Fatalf("plugin was not told why: %+v %s", r, r.Output)
	}
	// A cancellation is not a plugin failure.
	if st, _ := h.sup.Stats("fixture"); st.Restarts != 0 || !st.Running {
		t.Fatalf("stats: %+v", st)
	}
}

func TestHealthAndPerCallLifetime(t *testing.T) {
	h := newHarness(t, nil)
	spec := fixtureSpec(t, "good", []int{1, 2})
	spec.PerCallTools = []string{"fx.progress"}
	if err := h.sup.Add(spec); err != nil {
		t.Fatal(err)
	}
	if err := h.sup.Health(context.Background(), "fixture"); err != nil {
		t.Fatalf("not started yet counts as healthy: %v", err)
	}
	if _, err := echo(t, h.sup, "fixture"); err != nil {
		t.Fatal(err)
	}
	if err := h.sup.Health(context.Background(), "fixture"); err != nil {
		t.Fatal(err)
	}
	before, _ := h.sup.Stats("fixture")
	if _, err := h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "p", Tool: "fx.progress"}, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := h.sup.Stats("fixture")
	if after.InstanceID != before.InstanceID {
		t.Fatal("a per_call tool must not replace the session instance")
	}
}

func TestToolFSRealPlugin(t *testing.T) {
	h := newHarness(t, nil)
	os.WriteFile(filepath.Join(h.workspace, "a.txt"), []byte("hello\n"), 0o644)
	bin := filepath.Join(binDir, "tool-fs")
	if err := h.sup.Add(Spec{Name: "tool-fs", Version: "0.1.0", Kind: base.KindTool, Binary: bin, SHA256: fileSum(t, bin), APIVersions: []int{1, 2}}); err != nil {
		t.Fatal(err)
	}
	defs, err := h.sup.Tools(context.Background(), "tool-fs")
	if err != nil || len(defs) != 6 {
		t.Fatalf("tools: %v %v", defs, err)
	}
	r, err := h.sup.CallTool(context.Background(), "tool-fs", tool.Call{ID: "1", OperationID: "op1", Tool: "fs.read", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil)
	if err != nil || !r.OK || !strings.Contains(string(r.Output), "hello") {
		t.Fatalf("read: %v %+v", err, r)
	}
	st, _ := h.sup.Stats("tool-fs")
	if st.APIVersion != 2 {
		t.Fatalf("tool-fs negotiated %d", st.APIVersion)
	}
}

func TestBackgroundHealthCheckReplacesSickPlugin(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.HealthInterval = 100 * time.Millisecond })
	if err := h.sup.Add(fixtureSpec(t, "good", []int{1, 2})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "s", Tool: "fx.sicken"}, nil); err != nil {
		t.Fatal(err)
	}
	sick, _ := h.sup.Stats("fixture")
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := h.sup.Stats("fixture")
		if !st.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a plugin failing its health check was not stopped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r, err := echo(t, h.sup, "fixture"); err != nil || !r.OK {
		t.Fatalf("restart after failed health check: %v", err)
	}
	if st, _ := h.sup.Stats("fixture"); st.InstanceID == sick.InstanceID || st.Restarts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// recordingLauncher starts plugins as subprocesses and remembers the
// specs it was given.
type recordingLauncher struct {
	mu    sync.Mutex
	specs []sandbox.LaunchSpec
}

func (l *recordingLauncher) Prepare(ctx context.Context, spec sandbox.LaunchSpec, cfg *plugin.ClientConfig) (sandbox.Launched, error) {
	l.mu.Lock()
	l.specs = append(l.specs, spec)
	l.mu.Unlock()
	return sandbox.Subprocess{}.Prepare(ctx, spec, cfg)
}

func TestCodeMountsFollowCapabilitiesAndTrust(t *testing.T) {
	tcs := []sandbox.Toolchain{{Path: "/usr"}}
	var tcErr error
	rec := &recordingLauncher{}
	h := newHarness(t, func(o *Options) {
		o.Launcher = rec
		o.BuildCache = "/cache-dir"
		o.Toolchains = func() ([]sandbox.Toolchain, error) { return tcs, tcErr }
	})
	cases := []struct {
		name      string
		caps      []string
		tags      []string
		toolchain bool
		cache     bool
	}{
		{"nothing declared", nil, []string{"core_plugin"}, false, false},
		{"toolchain", []string{sandbox.CapToolchain}, []string{"third_party"}, true, false},
		{"cache, core plugin", []string{sandbox.CapBuildCache, sandbox.CapToolchain}, []string{"core_plugin"}, true, true},
		{"cache, third party", []string{sandbox.CapBuildCache}, []string{"third_party"}, false, false},
	}
	for i, c := range cases {
		spec := fixtureSpec(t, "plain", []int{1, 2})
		spec.Name = fmt.Sprintf("fixture%d", i)
		spec.Capabilities, spec.Tags = c.caps, c.tags
		h.sup.Add(spec)
		// The fixture reports its own name; only the launch spec matters here.
		_, _ = h.sup.Tools(context.Background(), spec.Name)
		rec.mu.Lock()
		got := rec.specs[len(rec.specs)-1]
		rec.mu.Unlock()
		if (len(got.Toolchains) > 0) != c.toolchain || (got.BuildCache != "") != c.cache {
			t.Errorf("%s: toolchains %v cache %q", c.name, got.Toolchains, got.BuildCache)
		}
	}
	tcErr = errors.New("bad toolchains section")
	spec := fixtureSpec(t, "plain", []int{1, 2})
	spec.Name, spec.Capabilities = "fixture-bad", []string{sandbox.CapToolchain}
	h.sup.Add(spec)
	if _, err := h.sup.Tools(context.Background(), spec.Name); err == nil || !strings.Contains(err.Error(), "bad toolchains section") {
		t.Fatalf("a broken toolchains section must stop the start: %v", err)
	}
}

// TestOutputSanitizedAfterEachCall: what a plugin leaves in its output
// directory that is not a regular file or directory (a link to a host
// file, a FIFO) is gone when the call returns, and the link is never
// followed.
func TestOutputSanitizedAfterEachCall(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.sup.Add(fixtureSpec(t, "good", []int{1, 2})); err != nil {
		t.Fatal(err)
	}
	call := func() CallInfo {
		_, info, err := h.sup.ExecuteTool(context.Background(), "fixture", tool.Call{ID: "1", Tool: "fx.echo", Args: json.RawMessage(`{}`)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	info := call()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(info.OutDir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(info.OutDir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(info.OutDir, "kept.txt"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	if again := call(); again.OutDir != info.OutDir {
		t.Fatalf("the second call ran in another instance: %s vs %s", again.OutDir, info.OutDir)
	}
	ents, _ := os.ReadDir(info.OutDir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "kept.txt" {
		t.Fatalf("output directory holds %q after the call, want only kept.txt", names)
	}
	if fi, err := os.Stat(secret); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the link's target was changed: %v %v", fi, err)
	}
}

// TestOutRootLinkRefused: the kernel never creates an output directory
// through a link planted where its output root should be.
func TestOutRootLinkRefused(t *testing.T) {
	elsewhere := t.TempDir()
	root := filepath.Join(t.TempDir(), "out")
	if err := os.Symlink(elsewhere, root); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *Options) { o.OutRoot = root })
	if err := h.sup.Add(fixtureSpec(t, "good", []int{1, 2})); err != nil {
		t.Fatal(err)
	}
	_, err := echo(t, h.sup, "fixture")
	if !uerr.HasCode(err, confine.CodeSymlink) {
		t.Fatalf("start with a linked output root: %v, want %s", err, confine.CodeSymlink)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Fatalf("created %d entries through the link", len(ents))
	}
}
