package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
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

// cacheDigest is the content of every file under dir/cargo whose path
// names fluffydep (the cached dependency's artifacts and sources), and
// fails if any file under dir is named "poisoned".
func cacheDigest(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(d.Name(), "poisoned") {
			t.Fatalf("project code wrote into the build cache: %s", p)
		}
		if d.Type().IsRegular() && strings.Contains(p, "fluffydep") {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = sha256.Sum256(b)
		}
		return nil
	})
	return out
}

// TestCargoBuildCache runs real cargo (in process, real Landlock) with a
// build cache and a crates.io dependency with a build script:
//   - the second run of a project reuses the dependency (cargo reports its
//     artifacts fresh, the log names it);
//   - a project whose build script and test try to write into the cache
//     (and to corrupt the dependency's artifacts under the target dir)
//     changes nothing there: the dependency's cached artifacts are
//     byte-identical, no file of its lands in the cache, and the clean
//     project's next run is still green from the cache;
//   - a manifest that points its build script at the project's real file
//     (outside the skeleton) turns the cache off for that run;
//   - a warm run sees an edit of the project: red, then green.
func TestCargoBuildCache(t *testing.T) {
	t.Setenv("PATH", sandboxPath(t))
	reg := filepath.Join(t.TempDir(), "registry")
	writeHostRegistry(t, reg)
	cache := t.TempDir()
	t.Setenv(registryEnv, reg)
	t.Setenv("FLUFFY_BUILD_CACHE", cache)
	ws := t.TempDir()
	manifest := func(name, extra string) string {
		return "[package]\nname = \"" + name + "\"\nversion = \"0.1.0\"\nedition = \"2021\"\n" + extra + "\n[dependencies]\nfluffydep = \"0.1\"\n"
	}
	test := func(want int) string {
		return fmt.Sprintf("#[cfg(test)]\nmod tests {\n    #[test]\n    fn answer() { assert_eq!(fluffydep::answer(), %d); }\n}\n", want)
	}
	// poison tries every file and directory of the cache, and every
	// fluffydep artifact of the target dir it was built in.
	poison := `use std::{cell::Cell, fs, path::Path};
fn walk(d: &Path, f: &dyn Fn(&Path)) {
    if let Ok(rd) = fs::read_dir(d) {
        for e in rd.flatten() {
            let p = e.path();
            f(&p);
            if p.is_dir() && !p.is_symlink() { walk(&p, f) }
        }
    }
}
fn try_write(p: &Path, ok: &Cell<u32>, denied: &Cell<u32>) {
    match fs::write(p, "poisoned") { Ok(_) => ok.set(ok.get() + 1), Err(_) => denied.set(denied.get() + 1) }
}
/// Tries every file and directory of the cache and every fluffydep
/// artifact under target; returns (cache writes that worked, cache
/// writes refused, target writes that worked).
pub fn poison(target: &Path) -> (u32, u32, u32) {
    let (ok, denied, tok, tdenied) = (Cell::new(0), Cell::new(0), Cell::new(0), Cell::new(0));
    let cache = Path::new(CACHE);
    try_write(&cache.join("poisoned"), &ok, &denied);
    walk(cache, &|p| {
        if p.is_dir() { try_write(&p.join("poisoned"), &ok, &denied) } else { try_write(p, &ok, &denied) }
    });
    walk(target, &|p| {
        if p.to_string_lossy().contains("fluffydep") && p.is_file() { try_write(p, &tok, &tdenied) }
    });
    (ok.get(), denied.get(), tok.get())
}
`
	poison = strings.Replace(poison, "CACHE", fmt.Sprintf("%q", cache), 1)
	files := map[string]string{
		"clean/Cargo.toml":  manifest("clean", ""),
		"clean/src/lib.rs":  test(42),
		"poison/Cargo.toml": manifest("poison", ""),
		"poison/build.rs": poison + `fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let (ok, denied, tok) = poison(out.ancestors().nth(4).unwrap());
    println!("cargo:warning=poison build script: cache writes ok={ok} denied={denied}; own target dir writes ok={tok}");
}
`,
		"poison/src/lib.rs": "#[cfg(test)]\nmod poison_code {\n" + poison + "}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn poison() { let (ok, denied, _) = super::poison_code::poison(std::path::Path::new(env!(\"CARGO_MANIFEST_DIR\"))); assert!(ok == 0 && denied > 0, \"cache writes ok={} denied={}\", ok, denied); }\n}\n",
		"escape/Cargo.toml": manifest("escape", "build = \""+filepath.Join(ws, "escape", "real.rs")+"\"\n"),
		"escape/real.rs":    poison + "fn main() { poison(std::path::Path::new(\"/nonexistent\")); }\n",
		"escape/src/lib.rs": test(42),
		"edit/Cargo.toml":   manifest("edit", ""),
		"edit/src/lib.rs":   test(43),
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
	run := func(t *testing.T, path string, want testrun.Status, logWant ...string) {
		t.Helper()
		r := runInProcess(t, ws, out, `{"path":"`+path+`"}`)
		log, _ := os.ReadFile(filepath.Join(out, "op", r.LogFile))
		if r.Status != want {
			t.Fatalf("status %s, want %s\nsummary: %s\nlog:\n%s", r.Status, want, r.Summary, log)
		}
		for _, w := range logWant {
			if !strings.Contains(string(log), w) {
				t.Fatalf("the log does not say %q:\n%s", w, log)
			}
		}
	}
	fresh := "cargo build cache: fresh from the cache: registry+https://github.com/rust-lang/crates.io-index#fluffydep@0.1.0"
	t.Run("cold then warm", func(t *testing.T) {
		run(t, "clean", testrun.Green, "cargo build cache: dependency phase")
		run(t, "clean", testrun.Green, fresh)
	})
	before := cacheDigest(t, cache)
	if len(before) == 0 {
		t.Fatal("nothing of fluffydep in the cache")
	}
	t.Run("poison", func(t *testing.T) {
		r := runInProcess(t, ws, out, `{"path":"poison"}`)
		plog, _ := os.ReadFile(filepath.Join(out, "op", r.LogFile))
		// The build script ran in the real build only, every write into
		// the cache was refused, and the private copy was its to spoil;
		// the test (run time) asserts the same refusal itself.
		if m := regexp.MustCompile(`poison build script: cache writes ok=(\d+) denied=(\d+); own target dir writes ok=(\d+)`).FindStringSubmatch(string(plog)); m == nil || m[1] != "0" || m[2] == "0" || m[3] == "0" {
			t.Fatalf("the poisoning build script did not run as expected (%v); %s %s\n%s", m, r.Status, r.Summary, plog)
		}
		t.Logf("poisoning project: %s: %s", r.Status, r.Summary)
		if after := cacheDigest(t, cache); !maps.Equal(before, after) {
			t.Fatalf("the cache changed:\nbefore %v\nafter %v", before, after)
		}
		run(t, "clean", testrun.Green, fresh)
	})
	t.Run("manifest escapes the skeleton", func(t *testing.T) {
		run(t, "escape", testrun.Green, "cargo build cache: not used (a target of escape is not a stub in the skeleton")
		cacheDigest(t, cache)
	})
	t.Run("edit red then green", func(t *testing.T) {
		run(t, "edit", testrun.Red, fresh)
		if err := os.WriteFile(filepath.Join(ws, "edit", "src", "lib.rs"), []byte(test(42)), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, "edit", testrun.Green, fresh)
	})
	if after := cacheDigest(t, cache); !maps.Equal(before, after) {
		t.Fatalf("the cache's fluffydep files changed:\nbefore %v\nafter %v", before, after)
	}
}
