package kernel

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/sandbox"
)

// projectVenvs are the names of a Python virtualenv's directory
// (tool-test searches the same names).
var projectVenvs = []string{".venv", "venv"}

// maxVenvDirs bounds the project's top-level directories searched.
const maxVenvDirs = 500

// venvDirs are the candidate virtualenvs of the project: .venv and venv
// at its root and in each of its top-level directories (one package of a
// repository holding several).
func venvDirs(project string) []string {
	dirs := []string{project}
	if f, err := os.Open(project); err == nil {
		es, _ := f.ReadDir(maxVenvDirs)
		f.Close()
		for _, e := range es {
			if e.IsDir() && !slices.Contains(projectVenvs, e.Name()) {
				dirs = append(dirs, filepath.Join(project, e.Name()))
			}
		}
	}
	var out []string
	for _, d := range dirs {
		for _, n := range projectVenvs {
			if fi, err := os.Lstat(filepath.Join(d, n, "pyvenv.cfg")); err == nil && fi.Mode().IsRegular() {
				out = append(out, filepath.Join(d, n))
			}
		}
	}
	return out
}

// venvToolchains are the Python installations the project's virtualenvs
// were made from (pyenv's, uv's, a python.org build), to be mounted
// read-only like the policy's toolchains: a venv's bin/python links out
// of the project to one of them, so without it the venv cannot run in a
// sandbox. The project names them (pyvenv.cfg's home and executable, the
// bin/python link), so a directory is mounted only when it is a Python
// installation — bin/python3* and lib/python3.*/os.py — that is not the
// project, $FLUFFY_HOME, or the user's home or a directory above it, and
// is not already inside a mounted toolchain.
func venvToolchains(project, home, userHome, hostRoot string, have []sandbox.Toolchain, log hclog.Logger) []sandbox.Toolchain {
	if project == "" {
		return nil
	}
	if abs, err := filepath.Abs(project); err == nil {
		project = abs
	}
	var out []sandbox.Toolchain
	seen := map[string]bool{}
	for _, vdir := range venvDirs(project) {
		for _, exe := range venvInterpreters(vdir, project, hostRoot) {
			prefix, ok := pythonPrefix(exe, project, hostRoot)
			if !ok || seen[prefix] {
				continue
			}
			seen[prefix] = true
			if why := refuseMount(prefix, project, home, userHome, have); why != "" {
				log.Debug("project virtualenv's interpreter not mounted", "venv", vdir, "path", prefix, "reason", why)
				continue
			}
			tc := sandbox.Toolchain{Path: prefix}
			if hostRoot != "" && hostRoot != "/" {
				tc.Local = filepath.Join(hostRoot, prefix)
			}
			log.Debug("mounting the project virtualenv's interpreter", "venv", vdir, "path", prefix)
			out = append(out, tc)
			have = append(have, tc)
		}
	}
	return out
}

// venvInterpreters are the interpreter paths a venv names: pyvenv.cfg's
// executable and home/python3, and where bin/python's links end.
func venvInterpreters(vdir, project, hostRoot string) []string {
	f, err := os.Open(filepath.Join(vdir, "pyvenv.cfg"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < 200; n++ {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v); k {
		case "executable":
			out = append(out, v)
		case "home":
			out = append(out, filepath.Join(v, "python3"))
		}
	}
	for _, b := range []string{"python", "python3"} {
		if p, ok := followLinks(filepath.Join(vdir, "bin", b), project, hostRoot); ok {
			out = append(out, p)
		}
	}
	return out
}

// followLinks resolves p's chain of symbolic links, at most 40 of them.
// Paths are host paths; outside the project they are read under hostRoot
// (the kernel in its L1 container sees the host's root there).
func followLinks(p, project, hostRoot string) (string, bool) {
	for range 40 {
		t, err := os.Readlink(localPath(p, project, hostRoot))
		if err != nil {
			return p, true
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		p = filepath.Clean(t)
	}
	return "", false
}

// localPath is where the kernel reads host path p.
func localPath(p, project, hostRoot string) string {
	if hostRoot == "" || hostRoot == "/" || p == project || strings.HasPrefix(p, project+"/") {
		return p
	}
	return filepath.Join(hostRoot, p)
}

// pythonPrefix is the installation exe belongs to: the directory above
// its bin/, when that holds lib/python3.*/os.py (the standard library).
func pythonPrefix(exe, project, hostRoot string) (string, bool) {
	if !filepath.IsAbs(exe) {
		return "", false
	}
	real, ok := followLinks(exe, project, hostRoot)
	if !ok || filepath.Base(filepath.Dir(real)) != "bin" || !strings.HasPrefix(filepath.Base(real), "python") {
		return "", false
	}
	prefix := filepath.Dir(filepath.Dir(real))
	libs, _ := filepath.Glob(filepath.Join(localPath(prefix, project, hostRoot), "lib", "python3.*", "os.py"))
	if len(libs) == 0 {
		return "", false
	}
	if fi, err := os.Stat(localPath(real, project, hostRoot)); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	return prefix, true
}

// refuseMount says why prefix must not be mounted, "" when it may.
func refuseMount(prefix, project, home, userHome string, have []sandbox.Toolchain) string {
	if err := sandbox.CheckToolchainPath(prefix); err != nil {
		return err.Error()
	}
	for _, t := range have {
		if prefix == t.Path || strings.HasPrefix(prefix, t.Path+"/") {
			return "already inside the toolchain " + t.Path
		}
	}
	for _, private := range []string{project, home} {
		if p, err := filepath.Abs(private); err == nil && private != "" && overlaps(prefix, p) {
			return "overlaps " + p
		}
	}
	if userHome != "" && (prefix == userHome || strings.HasPrefix(userHome, prefix+"/")) {
		return "is the user's home or a directory above it"
	}
	return ""
}

// EnvUserNode names, inside the sandbox, the installation of the node the
// user's PATH finds (tool-test runs that node, not the first on the
// sandbox's PATH).
const EnvUserNode = "FLUFFY_NODE_HOME"

// nodeToolchain is the installation of the first node on pathList (the
// kernel's PATH: nvm's, fnm's, a tarball's), mounted read-only like a
// policy toolchain when it is a node installation (bin/node plus
// lib/node_modules or include/node) that refuseMount allows; inside a
// mounted toolchain (/usr) it is in the sandbox already.
func nodeToolchain(pathList, project, home, userHome, hostRoot string, have []sandbox.Toolchain, log hclog.Logger) (sandbox.Toolchain, bool) {
	if abs, err := filepath.Abs(project); err == nil && project != "" {
		project = abs
	}
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) {
			continue
		}
		exe := filepath.Join(dir, "node")
		if fi, err := os.Stat(localPath(exe, project, hostRoot)); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		real, ok := followLinks(exe, project, hostRoot)
		if !ok || filepath.Base(filepath.Dir(real)) != "bin" {
			return sandbox.Toolchain{}, false
		}
		prefix := filepath.Dir(filepath.Dir(real))
		marker := false
		for _, m := range []string{"lib/node_modules", "include/node"} {
			if fi, err := os.Stat(filepath.Join(localPath(prefix, project, hostRoot), m)); err == nil && fi.IsDir() {
				marker = true
			}
		}
		if !marker {
			log.Debug("the node on PATH is not in a node installation; not mounted", "node", real)
			return sandbox.Toolchain{}, false
		}
		tc := sandbox.Toolchain{Path: prefix, Env: EnvUserNode}
		if hostRoot != "" && hostRoot != "/" {
			tc.Local = filepath.Join(hostRoot, prefix)
		}
		if why := refuseMount(prefix, project, home, userHome, have); why != "" {
			log.Debug("the node on PATH is not mounted", "path", prefix, "reason", why)
			return sandbox.Toolchain{}, false
		}
		return tc, true
	}
	return sandbox.Toolchain{}, false
}
