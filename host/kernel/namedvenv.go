package kernel

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// EnvPythonVenv tells tool-test where the configured virtualenv is
// mounted (its own path).
const EnvPythonVenv = "FLUFFY_PYTHON_VENV"

// namedVenvToolchains mounts the virtualenv test.python_venv names (one
// outside the project: poetry keeps them in its cache) read-only at its
// own path, announced to tool-test in EnvPythonVenv, and the Python
// installation it was made from, by the same rules as a project venv's.
func namedVenvToolchains(venv, project, home, userHome, hostRoot string, have []sandbox.Toolchain, log hclog.Logger) ([]sandbox.Toolchain, error) {
	bad := func(why, fix string) ([]sandbox.Toolchain, error) {
		return nil, uerr.New("CONFIG_INVALID", "test.python_venv cannot be used: "+venv, why, fix)
	}
	if !filepath.IsAbs(venv) {
		return bad("it is not an absolute path", "name the virtualenv's directory by its absolute path (poetry: `poetry env info --path`)")
	}
	venv = filepath.Clean(venv)
	local := venv
	if hostRoot != "" && hostRoot != "/" {
		local = filepath.Join(hostRoot, venv)
	}
	if fi, err := os.Lstat(filepath.Join(local, "pyvenv.cfg")); err != nil || !fi.Mode().IsRegular() {
		return bad("it has no pyvenv.cfg, so it is not a virtualenv", "point it at a directory made by `python -m venv`, uv or poetry")
	}
	if abs, err := filepath.Abs(project); err == nil && overlaps(venv, abs) {
		return bad("it is inside the project, which sandboxes see only through the filtered view",
			"name a virtualenv in the project .venv or venv (found without configuration), and clear test.python_venv")
	}
	if why := refuseMount(venv, project, home, userHome, have); why != "" {
		return bad(fmt.Sprintf("it would expose what sandboxes must not see (%s)", why), "keep the virtualenv in a directory of its own, outside $FLUFFY_HOME")
	}
	tc := sandbox.Toolchain{Path: venv, Env: EnvPythonVenv}
	if local != venv {
		tc.Local = local
	}
	out := []sandbox.Toolchain{tc}
	have = append(have, tc)
	for _, exe := range venvInterpreters(local, project, hostRoot) {
		prefix, ok := pythonPrefix(exe, project, hostRoot)
		if !ok {
			continue
		}
		if why := refuseMount(prefix, project, home, userHome, have); why != "" {
			log.Debug("the configured virtualenv's interpreter is not mounted", "venv", venv, "path", prefix, "reason", why)
			continue
		}
		ptc := sandbox.Toolchain{Path: prefix}
		if hostRoot != "" && hostRoot != "/" {
			ptc.Local = filepath.Join(hostRoot, prefix)
		}
		out = append(out, ptc)
		have = append(have, ptc)
	}
	log.Debug("mounting the configured virtualenv", "venv", venv, "mounts", len(out))
	return out, nil
}
