package main

import (
	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"

	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The cargo build cache keeps compiled crates.io dependencies between
// runs, in the kernel-owned build cache ($FLUFFY_BUILD_CACHE/cargo/
// <toolchain>/). The rule: code the AI wrote never runs with
// write access to it. So:
//
//   - the dependency phase, the only writer, builds a skeleton of the
//     workspace: the manifests and Cargo.lock copied, every .rs file an
//     empty `fn main() {}`, nothing else of the project. Project build
//     scripts and proc macros are stubs; what runs is cargo, rustc and the
//     dependencies' own build scripts and proc macros (third-party code
//     from the host's registry). cargo runs without RUSTC_BOOTSTRAP, so a
//     manifest cannot use cargo-features, and only on a release toolchain.
//     cargo metadata must show every project (path) package and every one
//     of its targets inside the skeleton, and every other package from a
//     registry: a manifest pointing a target, a path dependency, a patch
//     or a workspace outside it (at the project's real sources) turns the
//     cache off. After the build the skeleton's own packages are cleaned
//     from the cache (`cargo clean -p`): their stub artifacts would look
//     fresh to the real build.
//   - the real build works on a private copy of the cache's target dir in
//     the run's scratch, confined to scratch as before; CARGO_HOME is the
//     cache's, read-only there (the fingerprint of a registry dependency
//     includes its source path under CARGO_HOME, so both phases must use
//     one). Nothing is copied back.
//
// Anything unexpected — a project .cargo/config, a dependency phase that
// fails, a cache too big to copy — is a cold build as before, logged.

// maxCargoCacheBytes bounds the copy of the cache into scratch (the
// sandbox's /tmp is a small tmpfs).
const maxCargoCacheBytes = 256 << 20

// maxSkeletonFiles bounds the project walk that makes the skeleton.
const maxSkeletonFiles = 20000

// cargoWarm is what the dependency phase leaves for the real build.
type cargoWarm struct {
	home string // the cache's CARGO_HOME, read-only in the real build
}

// warmCargo runs the dependency phase and copies the cache's target dir
// to target. ok is false when the run must be cold; why is then in the
// log.
func (j *job) warmCargo(ctx context.Context, env []string, bin, root, cwd string, left func() time.Duration, target string) (cargoWarm, bool) {
	if j.cache == "" {
		return cargoWarm{}, false
	}
	skip := func(why string) (cargoWarm, bool) {
		fmt.Fprintf(j.log, "cargo build cache: not used (%s): cold build\n", why)
		return cargoWarm{}, false
	}
	if rustcVersion(ctx, filepath.Join(bin, "rustc")) == "" {
		return skip("the toolchain is not a release")
	}
	for d := cwd; ; d = filepath.Dir(d) {
		for _, f := range []string{".cargo/config", ".cargo/config.toml"} {
			if _, err := os.Lstat(filepath.Join(d, f)); err == nil {
				return skip("the project has " + f + ", which changes how cargo builds")
			}
		}
		if d == j.ws || !strings.HasPrefix(d, j.ws+string(filepath.Separator)) {
			break
		}
	}
	rel, err := filepath.Rel(root, cwd)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return skip("the package is outside its workspace root")
	}
	dir := filepath.Join(j.cache, "cargo", filepath.Base(filepath.Dir(bin)))
	home, skel, cacheTarget, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "skel"), filepath.Join(dir, "target"), filepath.Join(dir, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return skip(err.Error())
		}
	}
	unlock, err := lockDir(ctx, filepath.Join(dir, "lock"))
	if err != nil {
		return skip(err.Error())
	}
	defer unlock()
	if _, err := linkRegistry(home, getEnv(env, registryEnv)); err != nil {
		return skip(err.Error())
	}
	if err := os.RemoveAll(skel); err != nil {
		return skip(err.Error())
	}
	defer os.RemoveAll(skel)
	if err := writeSkeleton(root, skel); err != nil {
		return skip("skeleton: " + err.Error())
	}
	denv := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "RUSTC_BOOTSTRAP=") })
	denv = setEnv(setEnv(setEnv(denv, "CARGO_HOME", home), "CARGO_TARGET_DIR", cacheTarget), "TMPDIR", tmp)
	cargo := filepath.Join(bin, "cargo")
	confine := landlock.Command(j.self, dir)
	scwd := filepath.Join(skel, rel)

	stdout := &capBuffer{max: 16 << 20}
	res := j.execute(ctx, command{argv: append(slices.Clone(confine), cargo, "metadata", "--format-version", "1", "--offline"), dir: scwd, env: denv, timeout: left()}, stdout)
	if res.exitCode != 0 || res.err != nil || res.timedOut {
		return skip("cargo metadata on the skeleton failed")
	}
	pkgs, deps, why := skeletonPackages(res.stdout, skel)
	if why != "" {
		return skip(why)
	}
	if deps == 0 {
		return skip("no registry dependencies to cache")
	}
	clean := func() bool {
		if len(pkgs) == 0 {
			return true
		}
		argv := append(slices.Clone(confine), cargo, "clean", "--offline")
		for _, p := range pkgs {
			argv = append(argv, "-p", p)
		}
		r := j.execute(ctx, command{argv: argv, dir: scwd, env: denv, timeout: left()}, &capBuffer{max: 64 << 10})
		if r.exitCode != 0 || r.err != nil || r.timedOut {
			// Stub artifacts may be left: they must never reach a real build.
			os.RemoveAll(cacheTarget)
			return false
		}
		return true
	}
	argv := append(slices.Clone(confine), cargo, "test", "--no-run", "--offline", "--message-format=json",
		"--config", `env.RUSTC_BOOTSTRAP.value="-1"`, "--config", "env.RUSTC_BOOTSTRAP.force=true")
	if j.pattern == "/..." {
		argv = append(argv, "--workspace")
	}
	fmt.Fprintln(j.log, "cargo build cache: dependency phase on the project's skeleton (manifests, Cargo.lock, stub sources) in "+dir)
	stdout = &capBuffer{max: maxLogBytes}
	res = j.execute(ctx, command{argv: argv, dir: scwd, env: denv, timeout: left()}, stdout)
	built := res.exitCode == 0 && res.err == nil && !res.timedOut && bytes.Contains(res.stdout, []byte(`"reason":"build-finished","success":true`))
	if !clean() {
		return skip("cargo clean of the skeleton's packages failed; the cache's target dir was removed")
	}
	if !built {
		return skip("the dependency phase did not build")
	}
	size, err := treeSize(cacheTarget)
	if err != nil {
		return skip(err.Error())
	}
	if size > maxCargoCacheBytes {
		return skip(fmt.Sprintf("%d MiB of compiled dependencies is more than the %d MiB the sandbox's scratch can take", size>>20, maxCargoCacheBytes>>20))
	}
	if err := copyTree(cacheTarget, target); err != nil {
		os.RemoveAll(target)
		return skip("copying the cache: " + err.Error())
	}
	fmt.Fprintf(j.log, "cargo build cache: a private copy of %d KiB of compiled dependencies; CARGO_HOME %s read-only\n", size>>10, home)
	return cargoWarm{home: home}, true
}

// lockDir takes an exclusive flock on path: two runs of one project share
// the cache.
func lockDir(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeSkeleton copies the workspace's Cargo.toml and Cargo.lock files
// under root to skel and writes every .rs file as `fn main() {}`: nothing
// else of the project, and no project code. Hidden directories (.cargo,
// .git) and target are not walked; symlinks are not followed or copied.
func writeSkeleton(root, skel string) error {
	n := 0
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out := filepath.Join(skel, rel)
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "target") {
				return filepath.SkipDir
			}
			return os.MkdirAll(out, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if n++; n > maxSkeletonFiles {
			return fmt.Errorf("more than %d files", maxSkeletonFiles)
		}
		switch name := d.Name(); {
		case name == "Cargo.toml" || name == "Cargo.lock":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		case strings.HasSuffix(name, ".rs"):
			return os.WriteFile(out, []byte("fn main() {}\n"), 0o644)
		}
		return nil
	})
}

// skeletonPackages checks cargo metadata's view of the skeleton and
// returns the specs (name@version) of its path packages and the number of
// registry packages. why is set when
// the cache must not be used: the workspace root, a path package or one
// of its targets outside the skeleton (a manifest naming the project's
// real files), or a dependency that is neither a path package nor from a
// registry.
func skeletonPackages(stream []byte, skel string) (specs []string, deps int, why string) {
	var md struct {
		WorkspaceRoot string `json:"workspace_root"`
		Packages      []struct {
			Name         string  `json:"name"`
			Version      string  `json:"version"`
			ManifestPath string  `json:"manifest_path"`
			Source       *string `json:"source"`
			Targets      []struct {
				SrcPath string `json:"src_path"`
			}
		}
	}
	if err := json.Unmarshal(stream, &md); err != nil {
		return nil, 0, "cargo metadata: " + err.Error()
	}
	inside := func(p string) bool {
		r, err := filepath.Rel(skel, p)
		return err == nil && (r == "." || filepath.IsLocal(r))
	}
	if !inside(md.WorkspaceRoot) {
		return nil, 0, "the workspace root is outside the project"
	}
	for _, p := range md.Packages {
		if p.Source != nil {
			if !strings.HasPrefix(*p.Source, "registry+") && !strings.HasPrefix(*p.Source, "sparse+") {
				return nil, 0, fmt.Sprintf("%s comes from %s, not a registry", p.Name, *p.Source)
			}
			deps++
			continue
		}
		if !inside(p.ManifestPath) {
			return nil, 0, fmt.Sprintf("the path package %s is outside the project", p.Name)
		}
		for _, t := range p.Targets {
			fi, err := os.Lstat(t.SrcPath)
			if !inside(t.SrcPath) || !strings.HasSuffix(t.SrcPath, ".rs") || err != nil || !fi.Mode().IsRegular() {
				return nil, 0, fmt.Sprintf("a target of %s is not a stub in the skeleton: %s", p.Name, t.SrcPath)
			}
		}
		specs = append(specs, p.Name+"@"+p.Version)
	}
	return specs, deps, ""
}

// treeSize is the total size of the regular files under dir (0 when it
// does not exist).
func treeSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// copyTree copies src to dst: regular files (new inodes, never links: the
// real build may write through them), directories and symlinks, keeping
// modes and modification times (cargo's fingerprints compare mtimes).
func copyTree(src, dst string) error {
	var dirs []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, p)
			return os.MkdirAll(out, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, out)
		case d.Type().IsRegular():
			if err := copyFile(p, out, fi.Mode().Perm()); err != nil {
				return err
			}
			return os.Chtimes(out, fi.ModTime(), fi.ModTime())
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, d)
		if err := os.Chtimes(filepath.Join(dst, rel), fi.ModTime(), fi.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// freshDependencies lists the packages outside the project whose
// artifacts cargo reported fresh (reused from the cache) in a build's JSON
// stream: the evidence in the log that the cache was used.
func freshDependencies(stream []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m struct {
			Reason    string `json:"reason"`
			PackageID string `json:"package_id"`
			Fresh     bool   `json:"fresh"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Reason != "compiler-artifact" || !m.Fresh || strings.HasPrefix(m.PackageID, "path+") {
			continue
		}
		if !slices.Contains(out, m.PackageID) {
			out = append(out, m.PackageID)
		}
	}
	return out
}
