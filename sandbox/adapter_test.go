package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/manifests"
)

// TestFindAdapterOnlyAmongBuiltins: the adapter, which holds the
// engine socket, is never a runtime-docker found through PATH nor one
// installed into the plugin store.
func TestFindAdapterOnlyAmongBuiltins(t *testing.T) {
	// A fluffy on PATH with an adapter beside it, and one in a plugin store.
	pathDir := t.TempDir()
	writeFile(t, filepath.Join(pathDir, "fluffy"), "#!/bin/sh\n")
	if err := os.MkdirAll(filepath.Join(pathDir, "plugins", "runtime-docker"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(pathDir, "plugins", "runtime-docker", "runtime-docker"), "#!/bin/sh\necho planted\n")
	t.Setenv("PATH", pathDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "plugins", "runtime-docker", "9.9.9"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "plugins", "runtime-docker", "9.9.9", "runtime-docker"), "#!/bin/sh\necho installed\n")
	env := map[string]string{"FLUFFY_HOME": home}
	got, err := FindAdapter(func(k string) string { return env[k] })
	if err == nil {
		t.Fatalf("found %s: an adapter from PATH or the plugin store", got)
	}
	// The explicit override is honoured.
	want := filepath.Join(t.TempDir(), "runtime-docker")
	writeFile(t, want, "x")
	env["FLUFFY_RUNTIME_ADAPTER"] = want
	if got, err := FindAdapter(func(k string) string { return env[k] }); err != nil || got != want {
		t.Fatalf("override: %s %v", got, err)
	}
}

// TestAdapterVerifiedAgainstItsManifest: a builtin adapter whose binary no
// longer matches the sha256 `make build` stamped beside it is refused; a
// matching one runs from the binary store, not from where it was found.
func TestAdapterVerifiedAgainstItsManifest(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "runtime-docker")
	sum := writeFile(t, bin, "the adapter")
	data, err := os.ReadFile("../builtin-plugins/runtime-docker/plugin.yaml")
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
	store, err := OpenBinaryStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, got, err := verifyAdapter(store, bin)
	if err != nil || got != sum || !strings.HasPrefix(p, store.Dir()) {
		t.Fatalf("verify: %s %s %v", p, got, err)
	}
	writeFile(t, bin, "a planted adapter")
	if _, _, err := verifyAdapter(store, bin); errCode(err) != CodeBinaryMismatch {
		t.Fatalf("swapped adapter: %v, want %s", err, CodeBinaryMismatch)
	}
	// Without a manifest (FLUFFY_RUNTIME_ADAPTER naming a bare build), the
	// bytes copied are the bytes that run.
	_ = os.Remove(filepath.Join(dir, "plugin.yaml"))
	p, got, err = verifyAdapter(store, bin)
	if err != nil || p != store.Path(got) {
		t.Fatalf("bare adapter: %s %s %v", p, got, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "a planted adapter" {
		t.Fatalf("copy holds %q", b)
	}
}
