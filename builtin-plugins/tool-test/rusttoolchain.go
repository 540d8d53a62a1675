package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// A project pins its Rust toolchain with rust-toolchain.toml (or the
// legacy rust-toolchain) in the package's directory or one above it.
// rustup would install a pinned toolchain it lacks; the sandbox is
// offline, so the runner uses the pinned toolchain when RUSTUP_HOME has
// it and otherwise reports runner_error with the host command that
// installs it — never another toolchain, never a download.
//
// The file is project content the AI can write: it is read through an
// os.Root of the view (no link leads out), bounded, parsed strictly
// (only rustup's documented keys, only rustup's documented channel
// grammar), and the directory name it leads to is checked with
// confine.Name before it is joined under RUSTUP_HOME/toolchains.

const (
	rustToolchainTOML   = "rust-toolchain.toml"
	rustToolchainLegacy = "rust-toolchain"
	// maxToolchainFile bounds the file read (real ones are a few lines).
	maxToolchainFile  = 8 << 10
	codeRustToolchain = "TEST_RUST_TOOLCHAIN"
)

// rustChannel is rustup's toolchain-file grammar:
// <channel>[-<YYYY-MM-DD>], channel = stable|beta|nightly|<major.minor[.patch]>.
// Host-specific and custom toolchain names are not allowed in the file.
var rustChannel = regexp.MustCompile(`^(stable|beta|nightly|[0-9]{1,3}\.[0-9]{1,3}(\.[0-9]{1,3})?)(-[0-9]{4}-[0-9]{2}-[0-9]{2})?$`)

// rustPin is a project's toolchain pin.
type rustPin struct {
	file    string // project-relative slash path of the file, "" when none
	channel string // "" when the file names no channel (the default is used)
}

// findRustPin looks for a toolchain file in dir (project-relative) and
// each directory above it up to the project root, as rustup walks up
// from the working directory. In one directory the legacy
// rust-toolchain wins over rust-toolchain.toml, as in rustup.
func findRustPin(ws, dir string) (rustPin, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return rustPin{}, fmt.Errorf("open the project: %w", err)
	}
	defer root.Close()
	for d := path.Clean(dir); ; d = path.Dir(d) {
		for _, name := range []string{rustToolchainLegacy, rustToolchainTOML} {
			rel := path.Join(d, name)
			b, err := readBounded(root, rel)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return rustPin{file: rel}, uerr.New(codeRustToolchain, "cannot read "+rel, err.Error(), "make "+rel+" a small regular file inside the project")
			}
			ch, err := parseToolchainFile(name, b)
			if err != nil {
				return rustPin{file: rel}, uerr.New(codeRustToolchain, rel+" is not a toolchain file test.run accepts", err.Error(),
					"write `[toolchain]` then `channel = \"stable\"` (or beta, nightly, a version like 1.80.0, optionally -YYYY-MM-DD)")
			}
			return rustPin{file: rel, channel: ch}, nil
		}
		if d == "." || d == "/" {
			return rustPin{}, nil
		}
	}
}

// readBounded reads rel inside root: a regular file of at most
// maxToolchainFile bytes.
func readBounded(root *os.Root, rel string) ([]byte, error) {
	st, err := root.Lstat(rel)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxToolchainFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxToolchainFile {
		return nil, fmt.Errorf("larger than %d bytes", maxToolchainFile)
	}
	return b, nil
}

// parseToolchainFile returns the channel a toolchain file pins ("" for a
// TOML file without one). The legacy file is either one line holding
// the channel or the TOML form.
func parseToolchainFile(name string, b []byte) (string, error) {
	s := string(b)
	if strings.ContainsRune(s, 0) {
		return "", errors.New("contains a NUL byte")
	}
	if name == rustToolchainLegacy {
		if t := strings.TrimSpace(s); t != "" && !strings.ContainsAny(t, "\n[=") {
			if !rustChannel.MatchString(t) {
				return "", fmt.Errorf("channel %q is not stable, beta, nightly or a version, optionally followed by -YYYY-MM-DD", textsafe.Cap(t, 64))
			}
			return t, nil
		}
	}
	return parseToolchainTOML(s)
}

// parseToolchainTOML reads rustup's [toolchain] table: channel, path,
// components, targets, profile — nothing else. components, targets and
// profile are read and not used: test.run builds for the host with
// cargo and rustc only. path (a custom toolchain directory) is refused:
// a directory named by the project is not a toolchain the user
// installed.
func parseToolchainTOML(s string) (string, error) {
	seen := map[string]bool{}
	inTable := false
	channel := ""
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		n := i + 1
		l := strings.TrimSpace(stripComment(lines[i]))
		if l == "" {
			continue
		}
		if strings.HasPrefix(l, "[") {
			if l != "[toolchain]" || inTable {
				return "", fmt.Errorf("line %d: %q: only one [toolchain] table is allowed", n, textsafe.Cap(l, 64))
			}
			inTable = true
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !inTable {
			return "", fmt.Errorf("line %d: expected key = value inside [toolchain]", n)
		}
		if seen[k] {
			return "", fmt.Errorf("line %d: %s is set twice", n, textsafe.Cap(k, 32))
		}
		seen[k] = true
		switch k {
		case "channel", "profile", "path":
			str, err := tomlString(v)
			if err != nil {
				return "", fmt.Errorf("line %d: %s: %v", n, k, err)
			}
			switch k {
			case "channel":
				if !rustChannel.MatchString(str) {
					return "", fmt.Errorf("line %d: channel %q is not stable, beta, nightly or a version, optionally followed by -YYYY-MM-DD", n, textsafe.Cap(str, 64))
				}
				channel = str
			case "path":
				return "", fmt.Errorf("line %d: path (a custom toolchain directory) is not supported: the sandbox uses toolchains installed with rustup on the host", n)
			}
		case "components", "targets":
			// A multi-line array runs to its closing bracket.
			for !strings.Contains(v, "]") && i+1 < len(lines) {
				i++
				v += " " + strings.TrimSpace(stripComment(lines[i]))
			}
			if _, err := tomlStrings(v); err != nil {
				return "", fmt.Errorf("line %d: %s: %v", n, k, err)
			}
		default:
			return "", fmt.Errorf("line %d: unknown key %q (rustup's are channel, components, targets, profile, path)", n, textsafe.Cap(k, 32))
		}
	}
	if !inTable {
		return "", errors.New("no [toolchain] table")
	}
	return channel, nil
}

// stripComment drops a # comment outside quotes.
func stripComment(l string) string {
	var q rune
	for i, r := range l {
		switch {
		case q != 0 && r == q:
			q = 0
		case q == 0 && (r == '"' || r == '\''):
			q = r
		case q == 0 && r == '#':
			return l[:i]
		}
	}
	return l
}

// tomlString reads a TOML basic or literal string without escapes (none
// of rustup's values need one).
func tomlString(v string) (string, error) {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		s := v[1 : len(v)-1]
		if strings.ContainsAny(s, "\"'\\\n\r\t") {
			return "", errors.New("a string with quotes, escapes or control characters")
		}
		return s, nil
	}
	return "", fmt.Errorf("%q is not a quoted string", textsafe.Cap(v, 64))
}

// tomlStrings reads a one-line array of strings.
func tomlStrings(v string) ([]string, error) {
	inner, ok := strings.CutPrefix(v, "[")
	if inner, ok = strings.CutSuffix(inner, "]"); !ok {
		return nil, fmt.Errorf("%q is not an array of strings", textsafe.Cap(v, 64))
	}
	var out []string
	for _, e := range strings.Split(inner, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		s, err := tomlString(e)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// resolvePinned finds the installed toolchain directory (under
// rh/toolchains) for a pinned channel: the one rustup would use,
// <channel>-<host>; for a version pin (1.80.0, or 1.80 for any 1.80.x)
// without that directory, an installed stable release whose rustc is
// that version — the same compiler rustup would install. Nothing else.
func resolvePinned(ctx context.Context, rh, channel string) (dir, why string, err error) {
	tcs := filepath.Join(rh, "toolchains")
	host := rustupHost(rh)
	name := channel + "-" + host
	if err := confine.Name(name); err != nil || !rustChannel.MatchString(channel) {
		return "", "", uerr.New(codeRustToolchain, fmt.Sprintf("%q is not a toolchain name", channel), "a toolchain file names a channel, a version or a dated channel", "fix the toolchain file")
	}
	if isToolchain(filepath.Join(tcs, name)) {
		return name, "installed as " + name, nil
	}
	installed := installedToolchains(tcs, host)
	if v := channel; v[0] >= '0' && v[0] <= '9' && !strings.Contains(v, "-") {
		for _, c := range installed {
			if got := rustcVersion(ctx, filepath.Join(tcs, c, "bin", "rustc")); got != "" && (got == v || strings.HasPrefix(got, v+".") && strings.Count(v, ".") == 1) {
				return c, fmt.Sprintf("%s is rustc %s", c, got), nil
			}
		}
	}
	have := "none"
	if len(installed) > 0 {
		have = strings.Join(installed, ", ")
	}
	return "", "", uerr.New(codeRustToolchain, fmt.Sprintf("the project pins Rust toolchain %s, which is not installed", channel),
		fmt.Sprintf("the sandbox is offline and never downloads a toolchain or uses another one (installed in %s: %s)", tcs, have),
		fmt.Sprintf("run `rustup toolchain install %s` on the host, then test.run again", channel))
}

// isToolchain: a directory with an executable bin/cargo.
func isToolchain(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "bin", "cargo"))
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// installedToolchains lists the host's toolchains under tcs, sorted.
func installedToolchains(tcs, host string) []string {
	entries, _ := os.ReadDir(tcs)
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "-"+host) && isToolchain(filepath.Join(tcs, e.Name())) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// rustupHost is the host triple rustup names toolchains with:
// settings.toml's default_host_triple, else the default toolchain's
// suffix, else the triple of this machine's architecture.
func rustupHost(rh string) string {
	if b, err := os.ReadFile(filepath.Join(rh, "settings.toml")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "default_host_triple" {
				if h := strings.Trim(strings.TrimSpace(v), `"'`); confine.Name(h) == nil && h != "" {
					return h
				}
			}
		}
	}
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "riscv64": "riscv64gc", "ppc64le": "powerpc64le", "s390x": "s390x"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	return arch + "-unknown-linux-gnu"
}

// rustcVersion is the release a rustc reports ("1.80.0"), "" for a
// pre-release (beta, nightly, dev) or when it does not run.
func rustcVersion(ctx context.Context, rustc string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, rustc, "-V").Output()
	if err != nil {
		return ""
	}
	f := strings.Fields(string(out))
	if len(f) < 2 || f[0] != "rustc" {
		return ""
	}
	for _, p := range strings.Split(f[1], ".") {
		if _, err := strconv.Atoi(p); err != nil {
			return ""
		}
	}
	return f[1]
}
