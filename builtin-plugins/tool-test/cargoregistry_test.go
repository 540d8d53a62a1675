package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// cratesIOIndexDir is the directory cargo (1.85 and later) keeps the
// crates.io sparse index and .crate files under, in ~/.cargo/registry.
const cratesIOIndexDir = "index.crates.io-1949cf8c6b5b557f"

// writeHostRegistry writes what `cargo fetch` leaves in ~/.cargo/registry
// for one crates.io crate, fluffydep 0.1.0 (a lib with a build script):
// the sparse index's cache entry, config.json and the .crate file. No
// network is needed to make it, and cargo --offline resolves from it.
func writeHostRegistry(t *testing.T, reg string) {
	t.Helper()
	var tgz bytes.Buffer
	zw := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	for name, body := range map[string]string{
		"Cargo.toml": "[package]\nname = \"fluffydep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"build.rs":   "fn main() { println!(\"cargo:rustc-env=FLUFFYDEP_BUILT=yes\"); }\n",
		"src/lib.rs": "pub fn answer() -> u32 { assert_eq!(env!(\"FLUFFYDEP_BUILT\"), \"yes\"); 42 }\n",
	} {
		if err := tw.WriteHeader(&tar.Header{Name: "fluffydep-0.1.0/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tgz.Bytes())
	entry := `{"name":"fluffydep","vers":"0.1.0","deps":[],"cksum":"` + hex.EncodeToString(sum[:]) + `","features":{},"yanked":false}`
	// cargo's index cache file: cache version 3, index format version 2
	// (u32 LE), the index version, then version and JSON line pairs, each
	// NUL-terminated.
	cache := append([]byte{3, 2, 0, 0, 0}, "fixture\x000.1.0\x00"+entry+"\x00"...)
	files := map[string][]byte{
		"index/" + cratesIOIndexDir + "/config.json":            []byte(`{"dl":"https://static.crates.io/crates","api":"https://crates.io"}`),
		"index/" + cratesIOIndexDir + "/.cache/fl/uf/fluffydep": cache,
		"cache/" + cratesIOIndexDir + "/fluffydep-0.1.0.crate":  tgz.Bytes(),
	}
	for f, b := range files {
		p := filepath.Join(reg, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// listTree is every path under dir with its size, to see that a run
// wrote nothing there.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, err := d.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s %d\n", p, fi.Mode(), fi.ModTime(), fi.Size())
		return nil
	})
	return b.String()
}

// TestCargoHostRegistry runs real cargo (in process, real Landlock) on a
// project with a crates.io dependency: with the host's registry (as
// `cargo fetch` leaves it) in CRATES_REGISTRY_DIR the dependency resolves
// offline, its build script runs and the test is green, with and without
// a Cargo.lock, and the registry is left as it was (cargo extracts into
// the scratch CARGO_HOME); without it the run is a runner_error that says
// to fetch on the host.
func TestCargoHostRegistry(t *testing.T) {
	t.Setenv("PATH", sandboxPath(t))
	reg := filepath.Join(t.TempDir(), "registry")
	writeHostRegistry(t, reg)
	before := listTree(t, reg)
	ws := t.TempDir()
	manifest := "[package]\nname = \"%s\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nfluffydep = \"0.1\"\n"
	lib := "#[cfg(test)]\nmod tests {\n    #[test]\n    fn uses_the_crate() { assert_eq!(fluffydep::answer(), 42); }\n}\n"
	files := map[string]string{
		"nolock/Cargo.toml": strings.Replace(manifest, "%s", "nolock", 1),
		"nolock/src/lib.rs": lib,
		"locked/Cargo.toml": strings.Replace(manifest, "%s", "locked", 1),
		"locked/src/lib.rs": lib,
		"locked/Cargo.lock": "version = 4\n\n[[package]]\nname = \"fluffydep\"\nversion = \"0.1.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n[[package]]\nname = \"locked\"\nversion = \"0.1.0\"\ndependencies = [\n \"fluffydep\",\n]\n",
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
	out := t.TempDir()
	for _, path := range []string{"nolock", "locked"} {
		t.Run(path, func(t *testing.T) {
			t.Setenv(registryEnv, reg)
			r := runInProcess(t, ws, out, `{"path":"`+path+`"}`)
			if r.Status != testrun.Green || r.Counts.Passed != 1 {
				log, _ := os.ReadFile(filepath.Join(out, "op", r.LogFile))
				t.Fatalf("status %s (%d passed), want green with 1 passed\nsummary: %s\nlog:\n%s", r.Status, r.Counts.Passed, r.Summary, log)
			}
		})
	}
	if after := listTree(t, reg); after != before {
		t.Fatalf("the run changed the host registry:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	t.Run("no registry", func(t *testing.T) {
		r := runInProcess(t, ws, out, `{"path":"nolock"}`)
		if r.Status != testrun.RunnerError || !strings.Contains(r.Summary, "cargo fetch") {
			t.Fatalf("status %s, want runner_error that says to run cargo fetch on the host\nsummary: %s", r.Status, r.Summary)
		}
	})
}
