package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// TestParseLibtest: libtest's JSON events become tests; one that started
// and never ended (the binary died) failed.
func TestParseLibtest(t *testing.T) {
	stream := `{ "type": "suite", "event": "started", "test_count": 3 }
{ "type": "test", "event": "started", "name": "a" }
{ "type": "test", "name": "a", "event": "ok", "exec_time": 0.5 }
{ "type": "test", "event": "started", "name": "b" }
{ "type": "test", "name": "b", "event": "ignored", "message": "slow" }
{ "type": "test", "event": "started", "name": "c" }
thread 'c' panicked
`
	tests, unfinished, saw := parseLibtest([]byte(stream), "p/src/lib.rs")
	if !saw || len(tests) != 3 || len(unfinished) != 1 || unfinished[0] != "p/src/lib.rs c" {
		t.Fatalf("saw %v tests %+v unfinished %v", saw, tests, unfinished)
	}
	want := []string{testrun.Pass, testrun.Skip, testrun.Fail}
	for i, w := range want {
		if tests[i].Status != w || tests[i].Package != "p/src/lib.rs" {
			t.Errorf("test %d: %+v, want %s", i, tests[i], w)
		}
	}
	if tests[0].DurationMS != 500 || tests[1].Message != "slow" {
		t.Errorf("tests %+v", tests)
	}
	if _, _, saw := parseLibtest([]byte("error: the option `Z` is only accepted on the nightly compiler\n"), "x"); saw {
		t.Error("a binary that refused the JSON format counted as reported")
	}
}

// TestRustupDefault: settings.toml's short channel name finds its
// host-suffixed directory; nothing that is not a toolchain directory is
// returned.
func TestRustupDefault(t *testing.T) {
	rh := t.TempDir()
	if err := os.MkdirAll(filepath.Join(rh, "toolchains", "stable-x86_64-unknown-linux-gnu", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for settings, want := range map[string]string{
		"version = \"12\"\ndefault_toolchain = \"stable\"\n":        "stable-x86_64-unknown-linux-gnu",
		"default_toolchain = \"stable-x86_64-unknown-linux-gnu\"\n": "stable-x86_64-unknown-linux-gnu",
		"default_toolchain = \"nightly\"\n":                         "",
		"default_toolchain = \"../../etc\"\n":                       "",
		"profile = \"default\"\n":                                   "",
	} {
		if err := os.WriteFile(filepath.Join(rh, "settings.toml"), []byte(settings), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := rustupDefault(rh); got != want {
			t.Errorf("%q: got %q, want %q", settings, got, want)
		}
	}
}

// TestParseToolchainFile: rustup's documented forms are read; anything
// else — unknown keys, a custom path, host-specific or path-like channel
// names, more than one table — is refused rather than guessed at.
func TestParseToolchainFile(t *testing.T) {
	for _, c := range []struct {
		name, text, channel string
		ok                  bool
	}{
		{rustToolchainTOML, "[toolchain]\nchannel = \"1.80.0\"\n", "1.80.0", true},
		{rustToolchainTOML, "# pinned\n[toolchain] # the table\nchannel = 'nightly-2024-01-31'\ncomponents = [ \"rustfmt\", \"clippy\" ]\ntargets = [\n  \"wasm32-unknown-unknown\", # web\n  \"x86_64-unknown-linux-musl\",\n]\nprofile = \"minimal\"\n", "nightly-2024-01-31", true},
		{rustToolchainTOML, "[toolchain]\ncomponents = [\"rustfmt\"]\n", "", true},
		{rustToolchainTOML, "[toolchain]\nchannel = \"1.80\"\n", "1.80", true},
		{rustToolchainLegacy, "stable\n", "stable", true},
		{rustToolchainLegacy, "beta-2024-05-01", "beta-2024-05-01", true},
		{rustToolchainLegacy, "[toolchain]\nchannel = \"beta\"\n", "beta", true},
		{rustToolchainLegacy, "../../../etc\n", "", false},
		{rustToolchainLegacy, "stable-x86_64-unknown-linux-gnu\n", "", false},
		{rustToolchainTOML, "[toolchain]\nchannel = \"../../../../tmp/evil\"\n", "", false},
		{rustToolchainTOML, "[toolchain]\nchannel = \"stable/../../x\"\n", "", false},
		{rustToolchainTOML, "[toolchain]\nchannel = \"my-custom\"\n", "", false},
		{rustToolchainTOML, "[toolchain]\nchannel = \"stable\\u002f..\"\n", "", false},
		{rustToolchainTOML, "[toolchain]\npath = \"/workspace/evil\"\n", "", false},
		{rustToolchainTOML, "[toolchain]\nchannel = \"stable\"\nchannel = \"beta\"\n", "", false},
		{rustToolchainTOML, "[toolchain]\nchanel = \"stable\"\n", "", false},
		{rustToolchainTOML, "[toolchain]\nchannel = stable\n", "", false},
		{rustToolchainTOML, "[toolchain]\n[other]\n", "", false},
		{rustToolchainTOML, "channel = \"stable\"\n", "", false},
		{rustToolchainTOML, "", "", false},
		{rustToolchainTOML, "[toolchain]\ncomponents = \"rustfmt\"\n", "", false},
		{rustToolchainTOML, "[toolchain]\nchannel = \"stable\x00\"\n", "", false},
	} {
		ch, err := parseToolchainFile(c.name, []byte(c.text))
		if (err == nil) != c.ok || ch != c.channel {
			t.Errorf("%s %q: channel %q, error %v; want %q, ok %v", c.name, c.text, ch, err, c.channel, c.ok)
		}
	}
}

// fakeToolchain makes rh/toolchains/name with a bin/cargo and a bin/rustc
// that reports version.
func fakeToolchain(t *testing.T, rh, name, version string) {
	t.Helper()
	bin := filepath.Join(rh, "toolchains", name, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, body := range map[string]string{"cargo": "#!/bin/sh\nexit 1\n", "rustc": "#!/bin/sh\necho 'rustc " + version + " (0000000 2026-01-01)'\n"} {
		if err := os.WriteFile(filepath.Join(bin, f), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResolvePinned: the directory rustup would use, else an installed
// stable release of exactly the pinned version; otherwise a structured
// error naming the host command, never another toolchain.
func TestResolvePinned(t *testing.T) {
	rh := t.TempDir()
	const host = "x86_64-unknown-linux-gnu"
	if err := os.WriteFile(filepath.Join(rh, "settings.toml"), []byte("default_host_triple = \""+host+"\"\ndefault_toolchain = \"stable-"+host+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeToolchain(t, rh, "stable-"+host, "1.95.0")
	fakeToolchain(t, rh, "nightly-"+host, "1.96.0-nightly")
	fakeToolchain(t, rh, "1.70.0-"+host, "1.70.0")
	// A directory outside toolchains/ that a crafted channel would reach.
	fakeToolchain(t, filepath.Join(rh, "x"), "evil", "1.95.0")
	ctx := context.Background()
	for _, c := range []struct{ channel, want string }{
		{"stable", "stable-" + host},
		{"nightly", "nightly-" + host},
		{"1.70.0", "1.70.0-" + host},
		{"1.95.0", "stable-" + host},
		{"1.95", "stable-" + host},
		{"1.96.0", ""}, // only a nightly reports 1.96.0-nightly
		{"1.9", ""},    // 1.95.0 is not 1.9.x
		{"beta", ""},   // not installed
		{"nightly-2024-01-01", ""},
		{"../x/toolchains/evil", ""},
		{"../../" + rh + "/x/toolchains/evil", ""},
	} {
		got, _, err := resolvePinned(ctx, rh, c.channel)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%q: %q, %v; want %q", c.channel, got, err, c.want)
		}
		if c.want == "" && rustChannel.MatchString(c.channel) && (err == nil || !strings.Contains(err.Error(), "rustup toolchain install "+c.channel)) {
			t.Errorf("%q: error %v does not say how to install it", c.channel, err)
		}
	}
}

// pinCase is one toolchain-pin project of writePinFixtures.
type pinCase struct {
	path   string
	status testrun.Status
	want   string // in the summary, or for green in the log
}

// writePinFixtures writes projects pinning the installed stable by its
// exact version (rust-toolchain.toml, and a legacy rust-toolchain one
// directory up), a version that is not installed, and a crafted channel.
func writePinFixtures(t *testing.T, ws string) (rh string, cases []pinCase) {
	t.Helper()
	rh = os.Getenv("RUSTUP_HOME")
	if rh == "" {
		rh = filepath.Join(os.Getenv("HOME"), ".rustup")
	}
	def := rustupDefault(rh)
	version := rustcVersion(context.Background(), filepath.Join(rh, "toolchains", def, "bin", "rustc"))
	if def == "" || version == "" {
		t.Fatalf("the default toolchain %q in %s is not a release (rustc %q): this test pins an installed release by its version", def, rh, version)
	}
	test := "#[cfg(test)]\nmod tests {\n    #[test]\n    fn ok() {}\n}\n"
	files := map[string]string{
		"exact/rust-toolchain.toml":   "[toolchain]\nchannel = \"" + version + "\"\ncomponents = [\"rustfmt\"]\n",
		"exact/Cargo.toml":            "[package]\nname = \"exact\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"exact/src/lib.rs":            test,
		"legacy/rust-toolchain":       version + "\n",
		"legacy/pkg/Cargo.toml":       "[package]\nname = \"pkg\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"legacy/pkg/src/lib.rs":       test,
		"missing/rust-toolchain.toml": "[toolchain]\nchannel = \"1.20.0\"\n",
		"missing/Cargo.toml":          "[package]\nname = \"missing\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"missing/src/lib.rs":          test,
		"crafted/rust-toolchain":      "../../../../usr\n",
		"crafted/Cargo.toml":          "[package]\nname = \"crafted\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"crafted/src/lib.rs":          test,
	}
	for f, c := range files {
		p := filepath.Join(ws, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return rh, []pinCase{
		{"exact", testrun.Green, "exact/rust-toolchain.toml pins " + version + ": "},
		{"legacy/pkg", testrun.Green, "legacy/rust-toolchain pins " + version + ": "},
		{"missing", testrun.RunnerError, "`rustup toolchain install 1.20.0`"},
		{"crafted", testrun.RunnerError, "crafted/rust-toolchain is not a toolchain file"},
	}
}

// checkPin checks one pin case's result; log is the run's full log.
func checkPin(t *testing.T, c pinCase, rh string, r testrun.Run, log []byte) {
	t.Helper()
	if r.Status != c.status {
		t.Fatalf("status %s, want %s\nsummary: %s", r.Status, c.status, r.Summary)
	}
	if c.status != testrun.Green {
		if !strings.Contains(r.Summary, c.want) || !strings.Contains(r.Summary, "TEST_RUST_TOOLCHAIN") {
			t.Fatalf("summary %q does not say %q", r.Summary, c.want)
		}
		return
	}
	if !strings.Contains(string(log), c.want) || !strings.Contains(string(log), filepath.Join(rh, "toolchains")) {
		t.Fatalf("log does not say which toolchain the pin chose (%q):\n%s", c.want, log)
	}
}

// TestCargoToolchainPin runs real cargo (in process, real Landlock) on
// projects that pin their toolchain: the installed stable pinned by its
// exact version builds and runs with that toolchain; a pinned version
// that is not installed, or a crafted channel, is a runner_error that
// says what to do, not a run on another toolchain.
func TestCargoToolchainPin(t *testing.T) {
	t.Setenv("PATH", sandboxPath(t))
	ws := t.TempDir()
	rh, cases := writePinFixtures(t, ws)
	out := t.TempDir()
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			r := runInProcess(t, ws, out, `{"path":"`+c.path+`"}`)
			log, _ := os.ReadFile(filepath.Join(out, "op", r.LogFile))
			checkPin(t, c, rh, r, log)
		})
	}
}
