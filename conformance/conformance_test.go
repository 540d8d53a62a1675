package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/pluginsdk/plugintest"
)

func run(t *testing.T, dir string, startTimeout time.Duration) *conformance.Report {
	t.Helper()
	rep, err := conformance.New(options(t, startTimeout)).Run(context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("run %s: %v", dir, err)
	}
	return rep
}

func dump(t *testing.T, rep *conformance.Report) string {
	var b bytes.Buffer
	_ = rep.WriteText(&b)
	return b.String()
}

// Every builtin plugin and the SDK example pass their profile.
func TestBuiltinPluginsPass(t *testing.T) {
	for _, c := range []struct {
		bin      func() string
		manifest string
		docker   bool
		mustPass []string
	}{
		{func() string { return bins.toolFS }, "../builtin-plugins/tool-fs/plugin.yaml", false, []string{"TOOL-PATH-001", "TOOL-ARGS-001"}},
		{func() string { return bins.wordcnt }, "../pluginsdk/examples/wordcount/plugin.yaml", false, []string{"TOOL-PATH-001", "TOOL-ARGS-001"}},
		{func() string { return bins.adapter }, "../builtin-plugins/runtime-docker/plugin.yaml", true,
			[]string{"CORE-INFO-001", "CORE-STDOUT-001", "CORE-LOG-001", "CORE-HEALTH-001", "CORE-SHUTDOWN-001", "CORE-HANDSHAKE-004", "CORE-HANDSHAKE-005",
				"RUNTIME-LIFECYCLE-001", "RUNTIME-LIMITS-001", "RUNTIME-LABELS-001", "RUNTIME-CLEANUP-001"}},
	} {
		t.Run(c.manifest, func(t *testing.T) {
			if c.docker {
				needDocker(t)
			}
			rep := run(t, builtin(t, c.bin(), c.manifest), 10*time.Second)
			if !rep.Passed() {
				t.Fatalf("MUST failures:\n%s", dump(t, rep))
			}
			for _, id := range append([]string{"CORE-HANDSHAKE-001", "CORE-SHUTDOWN-002"}, c.mustPass...) {
				r, _ := rep.Result(id)
				if r.Status != conformance.Pass {
					t.Errorf("%s: %s %s", id, r.Status, r.Message)
				}
				t.Logf("%s: %s", id, r.Message)
			}
			t.Logf("%s in %s", rep.Summary(), rep.Duration)
		})
	}
}

// Each good fixture passes its kind's profile with every item of that
// profile really run: no item skipped (only items that do not apply to the
// plugin are "n/a"), the sandbox and proxy items included.
func TestGoodFixturesPass(t *testing.T) {
	for _, name := range []string{"tool-good", "provider-good", "vcs-good", "policy-good", "runtime-good"} {
		t.Run(name, func(t *testing.T) {
			if strings.HasPrefix(name, "runtime-") {
				needDocker(t)
			}
			rep := run(t, fixture(t, name, nil, ""), 5*time.Second)
			if !rep.Passed() {
				t.Fatalf("%s", dump(t, rep))
			}
			for _, r := range rep.Results {
				if r.Status == conformance.Skip {
					t.Errorf("%s skipped: %s", r.ID, r.Message)
				}
				if r.Status == conformance.Fail {
					t.Errorf("%s (%s) failed: %s", r.ID, r.Level, r.Message)
				}
			}
			// The items that used to skip or check less than they say.
			checks := map[string]string{"CORE-SANDBOX-001": "engine: template "}
			if name != "runtime-good" {
				checks["CORE-SANDBOX-001"] = "engine: template " + map[string]string{"provider-good": "ai-provider", "policy-good": "policy-sandbox"}[name]
			} else {
				checks["CORE-SANDBOX-001"] = ""
			}
			if name == "provider-good" {
				checks["PROVIDER-PROXY-001"] = "each a tunnel through the kernel's CONNECT proxy"
			}
			for id, want := range checks {
				r, _ := rep.Result(id)
				t.Logf("%s %s: %s", id, r.Status, r.Message)
				if want != "" && (r.Status != conformance.Pass || !strings.Contains(r.Message, want)) {
					t.Errorf("%s: %s %q, want a pass saying %q", id, r.Status, r.Message, want)
				}
			}
			t.Logf("%s in %s\n%s", rep.Summary(), rep.Duration, dump(t, rep))
		})
	}
}

// One broken fixture per MUST item: each fails exactly that MUST item, and
// its message tells the author what to fix.
func TestBrokenFixturesFailExactlyTheirItem(t *testing.T) {
	cases := []struct {
		name    string
		want    string
		edit    func(string) string
		sum     string
		hint    string // substring of the failure message
		needsL2 bool
		// needsDocker: a runtime adapter fixture, run against the engine.
		needsDocker bool
		startMax    time.Duration
	}{
		{name: "manifest-invalid", want: "CORE-MANIFEST-001", edit: func(y string) string { return strings.Replace(y, "version: 1.0.0", "version: one", 1) }, hint: "version"},
		{name: "manifest-sum", want: "CORE-MANIFEST-002", sum: strings.Repeat("ab", 32), hint: "sha256"},
		{name: "manifest-range", want: "CORE-MANIFEST-003", edit: func(y string) string { return strings.Replace(y, "api_versions: [1, 2]", "api_versions: [3]", 1) }, hint: "API"},
		{name: "tool-badcookie", want: "CORE-HANDSHAKE-001", hint: "pluginsdk"},
		{name: "tool-v1only", want: "CORE-HANDSHAKE-004", hint: "fix: serve every declared version"},
		// Declares a version the kernel cannot speak and the binary does not serve.
		{name: "manifest-v3", want: "CORE-HANDSHAKE-004", edit: func(y string) string { return strings.Replace(y, "api_versions: [1, 2]", "api_versions: [1, 2, 3]", 1) }, hint: "v3: offered only v3, the binary refused it"},
		{name: "tool-rangepanic", want: "CORE-HANDSHAKE-005", hint: "panicked"},
		{name: "tool-liar", want: "CORE-INFO-001", hint: "rebuild the plugin and its plugin.yaml together"},
		{name: "tool-slowstart", want: "CORE-START-001", hint: "start timeout", startMax: 1500 * time.Millisecond},
		{name: "tool-stdout", want: "CORE-STDOUT-001", hint: "never print to stdout"},
		{name: "tool-rawlog", want: "CORE-LOG-001", hint: "pluginsdk.NewLogger"},
		{name: "tool-unhealthy", want: "CORE-HEALTH-001", hint: "database not reachable"},
		{name: "tool-noexit", want: "CORE-SHUTDOWN-001", hint: "return from main"},
		{name: "tool-orphan", want: "CORE-SHUTDOWN-002", hint: "exits when the kernel's connection closes"},
		{name: "tool-rootwrite", want: "CORE-SANDBOX-001", hint: "writable root", needsL2: true},
		{name: "tool-schema", want: "TOOL-SCHEMA-001", hint: "fx.hidden"},
		{name: "tool-crashargs", want: "TOOL-ARGS-001", hint: "structured error"},
		{name: "tool-escape", want: "TOOL-PATH-001", hint: "os.Root"},
		{name: "tool-bigout", want: "TOOL-OUTPUT-001", hint: "truncate"},
		{name: "tool-badpatch", want: "TOOL-PATCH-001", hint: "not a unified diff"},
		{name: "tool-wswrite", want: "TOOL-WRITE-001", hint: ".fx-cache"},
		{name: "provider-dropdelta", want: "PROVIDER-STREAM-001", hint: "in order"},
		{name: "provider-badtool", want: "PROVIDER-TOOLCALL-001", hint: "tool call"},
		{name: "provider-nocancel", want: "PROVIDER-CANCEL-001", hint: "NewRequestWithContext"},
		{name: "provider-rawerror", want: "PROVIDER-ERROR-001", hint: "*uerr.Error"},
		{name: "provider-direct", want: "PROVIDER-PROXY-001", hint: "went around the proxy"},
		// A SHOULD item: no MUST fails, the SHOULD does.
		{name: "tool-nocancel", want: "TOOL-PROGRESS-001", hint: "fx.write: no result"},
		{name: "vcs-nostatus", want: "VCS-STATUS-001", hint: "new.txt"},
		{name: "vcs-nocommit", want: "VCS-COMMIT-001", hint: "kernel refused"},
		{name: "vcs-emptymsg", want: "VCS-ERROR-001", hint: "empty message"},
		{name: "policy-slow", want: "POLICY-LATENCY-001", hint: "budget"},
		{name: "policy-weird", want: "POLICY-DECISION-001", hint: "maybe"},
		{name: "policy-crash", want: "POLICY-MALFORMED-001", hint: "crashed"},
		{name: "runtime-nolabels", want: "RUNTIME-LABELS-001", hint: "pass Spec.Labels to the engine", needsDocker: true},
		{name: "runtime-remove2", want: "RUNTIME-LIFECYCLE-001", hint: "second Remove", needsDocker: true},
		{name: "runtime-nolimits", want: "RUNTIME-LIMITS-001", hint: "Spec.MemoryBytes", needsDocker: true},
		{name: "runtime-leakvol", want: "RUNTIME-CLEANUP-001", hint: "RemoveVolumes", needsDocker: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := c.startMax
			if st == 0 {
				st = 5 * time.Second
			}
			if c.needsDocker {
				needDocker(t)
			}
			o := options(t, st)
			if c.needsL2 && o.Sandbox == nil {
				// Without Docker the item skips; options() already failed the
				// test if FLUFFY_REQUIRE_DOCKER demanded it.
				t.Skipf("needs the L2 sandbox: %s", o.SandboxReason)
			}
			rep, err := conformance.New(o).Run(context.Background(), fixture(t, c.name, c.edit, c.sum), nil)
			if err != nil {
				t.Fatal(err)
			}
			failed := rep.FailedMUST()
			r, _ := rep.Result(c.want)
			if r.Level == conformance.SHOULD {
				if len(failed) != 0 || r.Status != conformance.Fail {
					t.Fatalf("want only the SHOULD item %s to fail, got %s and MUST failures %v\n%s", c.want, r.Status, failed, dump(t, rep))
				}
			} else if len(failed) != 1 || failed[0] != c.want {
				t.Fatalf("want exactly %s to fail, got %v\n%s", c.want, failed, dump(t, rep))
			}
			if !strings.Contains(r.Message, c.hint) {
				t.Fatalf("%s message lacks %q:\n%s", c.want, c.hint, r.Message)
			}
			t.Logf("%s: %s", c.want, r.Message)
		})
	}
}

// Reports render as JSON and JUnit that machines can read back.
func TestReportFormats(t *testing.T) {
	rep := run(t, fixture(t, "tool-wswrite", nil, ""), 5*time.Second)
	var j bytes.Buffer
	if err := rep.WriteJSON(&j); err != nil {
		t.Fatal(err)
	}
	var back conformance.Report
	if err := json.Unmarshal(j.Bytes(), &back); err != nil || len(back.Results) != len(rep.Results) || back.Passed() {
		t.Fatalf("JSON round trip: %v", err)
	}
	var x bytes.Buffer
	if err := rep.WriteJUnit(&x); err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Suites []struct {
			Name     string `xml:"name,attr"`
			Failures int    `xml:"failures,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(x.Bytes(), &suites); err != nil || len(suites.Suites) != 2 {
		t.Fatalf("JUnit: %v\n%s", err, x.String())
	}
	found := false
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			if strings.HasPrefix(c.Name, "TOOL-WRITE-001") && c.Failure != nil {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("JUnit lacks the TOOL-WRITE-001 failure:\n%s", x.String())
	}
	if _, err := conformance.New(conformance.Options{}).Run(context.Background(), os.TempDir(), []string{"bogus"}); err == nil {
		t.Fatal("unknown profile accepted")
	}
}

// Plugin authors run the same suite from their own go test.
func TestPluginTestHelper(t *testing.T) {
	needDocker(t)
	if os.Getenv("FLUFFY_RUNTIME_ADAPTER") == "" {
		t.Setenv("FLUFFY_RUNTIME_ADAPTER", bins.adapter)
	}
	rep := plugintest.Conformance(t, "../pluginsdk/examples/wordcount", "../pluginsdk/examples/wordcount/plugin.yaml")
	if !rep.Passed() || rep.Plugin != "wordcount" {
		t.Fatalf("wordcount: %s", rep.Summary())
	}
	if r, _ := rep.Result("CORE-SHUTDOWN-002"); r.Status != conformance.Pass {
		t.Fatalf("stub kernel not wired: %+v", r)
	}
}

// recTB records what a plugintest helper reports instead of failing the
// test; Fatalf ends the helper's goroutine as testing.T's does.
type recTB struct {
	testing.TB
	mu     sync.Mutex
	fatal  []string
	errors []string
}

func (r *recTB) Helper()             {}
func (r *recTB) Logf(string, ...any) {}
func (r *recTB) Errorf(f string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(f, a...))
}
func (r *recTB) Fatalf(f string, a ...any) {
	r.mu.Lock()
	r.fatal = append(r.fatal, fmt.Sprintf(f, a...))
	r.mu.Unlock()
	runtime.Goexit()
}

func runTB(t *testing.T, f func(tb testing.TB) *conformance.Report) (*recTB, *conformance.Report) {
	r := &recTB{TB: t}
	var rep *conformance.Report
	done := make(chan struct{})
	go func() {
		defer close(done)
		rep = f(r)
	}()
	<-done
	return r, rep
}

// Without the L2 sandbox the author's test fails and says how to fix it
// (it used to skip the sandbox items and stay green); the
// explicit opt-out runs the rest and reports NOT CERTIFIED.
func TestPluginTestHelperNeedsTheSandbox(t *testing.T) {
	if os.Getenv(conformance.EnvRequireDocker) != "" {
		t.Setenv(conformance.EnvRequireDocker, "")
	}
	t.Setenv("FLUFFY_RUNTIME_ADAPTER", filepath.Join(t.TempDir(), "missing"))
	r, _ := runTB(t, func(tb testing.TB) *conformance.Report {
		return plugintest.Conformance(tb, "../pluginsdk/examples/wordcount", "../pluginsdk/examples/wordcount/plugin.yaml")
	})
	if len(r.fatal) != 1 || !strings.Contains(r.fatal[0], "cannot be certified") || !strings.Contains(r.fatal[0], "ConformanceWithoutSandbox") {
		t.Fatalf("without the adapter: fatal %q, errors %q", r.fatal, r.errors)
	}
	r, rep := runTB(t, func(tb testing.TB) *conformance.Report {
		return plugintest.ConformanceWithoutSandbox(tb, "../pluginsdk/examples/wordcount", "../pluginsdk/examples/wordcount/plugin.yaml")
	})
	if len(r.fatal)+len(r.errors) != 0 || rep == nil || rep.Passed() || strings.Join(rep.SkippedMUST(), ",") != "CORE-SANDBOX-001,CORE-SANDBOX-002" {
		t.Fatalf("opted out: fatal %q, errors %q, report %+v", r.fatal, r.errors, rep)
	}
	if !strings.HasPrefix(rep.Summary(), "NOT CERTIFIED") {
		t.Fatalf("opted out, the report says %q", rep.Summary())
	}
}
