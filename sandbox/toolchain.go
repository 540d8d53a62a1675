package sandbox

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Capabilities a plugin declares (required_capabilities) to get the
// mounts of templates that run code.
const (
	// CapToolchain: the policy's toolchain directories, read-only.
	CapToolchain = "sandbox.toolchain"
	// CapBuildCache: the project's build cache, writable. Only core
	// plugins get it: whatever writes the cache decides what later builds
	// link.
	CapBuildCache = "sandbox.build_cache"
)

// GuestCache is where the build cache is mounted; EnvBuildCache names it
// for the plugin.
const (
	GuestCache    = "/cache"
	EnvBuildCache = "FLUFFY_BUILD_CACHE"
)

// GuestHostGoCache is where the host's Go build cache is mounted,
// read-only, beside the build cache; EnvHostGoCache names it for the
// plugin, whose go command reads it under the project's cache (see
// docs/decisions/go-build-cache-layers.md). The sandbox never gets a
// writable view of it.
const (
	GuestHostGoCache = "/hostcache/go-build"
	EnvHostGoCache   = "FLUFFY_HOST_GOCACHE"
)

// codeTmpfsBytes is /tmp in templates that run code: compilers and linkers
// write their work directories there, and test binaries run from it.
const codeTmpfsBytes = 512 << 20

// PolicySection is the policy's top-level section listing toolchains.
const PolicySection = "toolchains"

// Toolchain is a host directory mounted read-only at the same path into
// sandboxes that run code.
type Toolchain struct {
	// Path is absolute and clean.
	Path string `yaml:"path"`
	// Env, if set, names an environment variable set to Path inside
	// (GOMODCACHE, CARGO_HOME, ...).
	Env string `yaml:"env,omitempty"`
	// Local is where the kernel itself sees Path when that differs (the
	// kernel in L1 sees the host's root at /host); "" means Path.
	Local string `yaml:"-"`
}

// local is the path the kernel can read the toolchain at.
func (t Toolchain) local() string {
	if t.Local != "" {
		return t.Local
	}
	return t.Path
}

// guestReserved are paths of the L2 layout a toolchain may neither be,
// contain, nor sit below.
var guestReserved = []string{GuestWorkspace, GuestOut, GuestPluginDir, "/run", GuestTmp, GuestCache, path.Dir(GuestHostGoCache), "/proc", "/dev", "/sys", "/etc"}

// ParseToolchains reads the policy's toolchains section:
//
//	toolchains:
//	  - path: /usr/local/go
//	  - path: ~/go/pkg/mod
//	    env: GOMODCACHE
//
// `~/` is the kernel user's home (home). A path that does not exist on
// this machine is dropped (reported in skipped), so one policy serves
// machines with different toolchains. Every other problem is an error.
// hostRoot is where the host's root filesystem is visible to the kernel
// ("" or "/" normally; the L1 container mounts it read-only at /host): the
// paths stay host paths (the engine resolves bind mounts on the host), only
// their existence is checked under hostRoot.
func ParseToolchains(node *yaml.Node, home, hostRoot string) (tcs []Toolchain, skipped []string, err error) {
	if node == nil {
		return nil, nil, nil
	}
	const shape = "write a list of {path: /abs/dir, env: NAME} entries"
	if node.Kind != yaml.SequenceNode {
		return nil, nil, toolchainErr(fmt.Sprintf("line %d: %s is not a list", node.Line, PolicySection), shape)
	}
	var raw []Toolchain
	for _, item := range node.Content {
		if item.Kind != yaml.MappingNode {
			return nil, nil, toolchainErr(fmt.Sprintf("line %d: an entry is not a mapping", item.Line), shape)
		}
		for i := 0; i+1 < len(item.Content); i += 2 {
			if k := item.Content[i].Value; k != "path" && k != "env" {
				return nil, nil, toolchainErr(fmt.Sprintf("line %d: unknown field %q", item.Content[i].Line, k), shape)
			}
		}
		var t Toolchain
		if err := item.Decode(&t); err != nil {
			return nil, nil, toolchainErr(fmt.Sprintf("line %d: %v", item.Line, err), shape)
		}
		raw = append(raw, t)
	}
	seen := map[string]bool{}
	for i, t := range raw {
		p := t.Path
		if strings.HasPrefix(p, "~/") {
			if home == "" {
				return nil, nil, toolchainErr(fmt.Sprintf("entry %d (%s) uses ~ but the kernel has no home directory", i+1, p), "write an absolute path")
			}
			p = filepath.Join(home, p[2:])
		}
		if err := CheckToolchainPath(p); err != nil {
			return nil, nil, err
		}
		p = filepath.Clean(p)
		if t.Env != "" && !validEnvName(t.Env) {
			return nil, nil, toolchainErr(fmt.Sprintf("entry %d: %q is not an environment variable name", i+1, t.Env), "use letters, digits and underscores, e.g. GOMODCACHE")
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		if fi, err := os.Stat(filepath.Join(hostRoot, p)); err != nil || !fi.IsDir() {
			skipped = append(skipped, p)
			continue
		}
		tc := Toolchain{Path: p, Env: t.Env}
		if hostRoot != "" && hostRoot != "/" {
			tc.Local = filepath.Join(hostRoot, p)
		}
		tcs = append(tcs, tc)
	}
	return tcs, skipped, nil
}

// CheckToolchainPath refuses a toolchain path that is not absolute, is the
// root, or collides with the sandbox's own layout (it would hide or expose
// /workspace, /out, the plugin binary, sockets, /tmp, the cache, /etc).
func CheckToolchainPath(p string) error {
	if p == "" || !filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
		return toolchainErr(fmt.Sprintf("%q is not an absolute path", p), "write an absolute directory such as /usr/local/go")
	}
	c := filepath.Clean(p)
	if c == "/" {
		return toolchainErr("the root directory cannot be a toolchain", "name the toolchain's own directory, e.g. /usr/local/go")
	}
	for _, r := range guestReserved {
		if c == r || strings.HasPrefix(c, r+"/") || strings.HasPrefix(r, c+"/") {
			return toolchainErr(fmt.Sprintf("%s collides with the sandbox's %s", c, r), "sandboxes use "+strings.Join(guestReserved, ", ")+" themselves; name a directory elsewhere")
		}
	}
	return nil
}

func validEnvName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != "" && !slices.Contains([]string{"PATH", "HOME", "TMPDIR", EnvBuildCache, EnvHostGoCache}, s) && !strings.HasPrefix(s, "FLUFFY_") && !strings.HasPrefix(s, "PLUGIN_")
}

func toolchainErr(why, fix string) error {
	return uerr.New("POLICY_TOOLCHAINS_INVALID", "the policy's toolchains section cannot be used", why, fix)
}

// toolchainMounts orders toolchains so a parent directory is mounted before
// a directory inside it.
func toolchainMounts(tcs []Toolchain) []Toolchain {
	out := slices.Clone(tcs)
	slices.SortStableFunc(out, func(a, b Toolchain) int { return strings.Count(a.Path, "/") - strings.Count(b.Path, "/") })
	return out
}

// toolchainEnv is the environment that goes with the toolchains: PATH made
// of each toolchain's bin/ directory (policy order; guestRoot maps a host
// path to where the plugin sees it), each Env variable, and the cache.
func toolchainEnv(tcs []Toolchain, cache string) []string {
	var env, path []string
	for _, t := range tcs {
		if fi, err := os.Stat(filepath.Join(t.local(), "bin")); err == nil && fi.IsDir() {
			path = append(path, filepath.Join(t.Path, "bin"))
		}
		if t.Env != "" {
			env = append(env, t.Env+"="+t.Path)
		}
	}
	if len(path) > 0 {
		env = append(env, "PATH="+strings.Join(path, ":"))
	}
	if cache != "" {
		env = append(env, EnvBuildCache+"="+cache)
	}
	return env
}

// codeMounts drops what a template may not get: toolchains and the cache
// only go to templates that run code, and the cache never to gVisor, which
// has no Landlock (the plugin could not run code without giving it write
// access to the cache; builds there are cold instead).
func codeMounts(tpl Template, spec LaunchSpec) LaunchSpec {
	if !tpl.RunsCode {
		spec.Toolchains, spec.BuildCache = nil, ""
	}
	if tpl.OCIRuntime == "runsc" {
		spec.BuildCache = ""
	}
	if spec.BuildCache == "" {
		// The host's cache is the lower layer of the build cache only.
		spec.HostGoCache = Toolchain{}
	}
	return spec
}

// hostGoCacheEnv is the variable that tells the plugin where the host's
// Go build cache is (guest: where it sees it), or nothing.
func hostGoCacheEnv(spec LaunchSpec, guest string) []string {
	if spec.HostGoCache.Path == "" || spec.BuildCache == "" {
		return nil
	}
	return []string{EnvHostGoCache + "=" + guest}
}

// prepareCacheDir makes the build cache writable by the sandbox user
// through the shared group, like an output directory.
func prepareCacheDir(dir string, gid int) error {
	return prepareOutDir(dir, gid)
}
