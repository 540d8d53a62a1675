package main

import (
	"os"
	"path/filepath"
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
