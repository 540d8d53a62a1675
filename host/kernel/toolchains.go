package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// EnvHostRoot names where the host's root filesystem is visible to a
// kernel that runs in its L1 container (the bootstrap mounts it read-only
// at /host). Host paths the kernel hands to the engine stay host paths;
// only their existence is checked under this root.
const EnvHostRoot = "FLUFFY_HOST_ROOT"

// BuildCacheDir is the project's build cache under $FLUFFY_HOME: the
// kernel owns it (sandboxes of core plugins that declare
// sandbox.build_cache get it writable; nothing else does). One directory
// per project path, so sessions of a project share warm builds.
func BuildCacheDir(home, project string) string {
	abs, err := filepath.Abs(project)
	if err != nil {
		abs = project
	}
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	return filepath.Join(home, "cache", hex.EncodeToString(sum[:8]))
}

// toolchains reads the policy's toolchains section (see
// sandbox.ParseToolchains) and refuses directories that would expose what
// sandboxes must not see: the project itself (plugins see only the
// filtered view) and $FLUFFY_HOME (stores, audit, caches, sockets).
func toolchains(pol *policy.Policy, home, project, venv, hostRoot string, log hclog.Logger) ([]sandbox.Toolchain, error) {
	node, _ := pol.Section(sandbox.PolicySection)
	userHome, _ := os.UserHomeDir()
	tcs, skipped, err := sandbox.ParseToolchains(node, userHome, hostRoot)
	if err != nil {
		return nil, uerr.Wrap(err, "POLICY_TOOLCHAINS_INVALID", "the policy's toolchains section cannot be used ("+pol.File+")",
			uerr.From(err).Why, uerr.From(err).Fix)
	}
	for _, s := range skipped {
		log.Debug("toolchain directory absent on this machine; not mounted", "path", s)
	}
	for _, t := range tcs {
		for _, private := range []string{project, home} {
			if private == "" {
				continue
			}
			p, err := filepath.Abs(private)
			if err != nil {
				continue
			}
			if overlaps(t.Path, p) {
				return nil, uerr.New("POLICY_TOOLCHAINS_INVALID", "the policy's toolchains section cannot be used ("+pol.File+")",
					fmt.Sprintf("%s overlaps %s, which sandboxes must not see directly", t.Path, p),
					"list only toolchain directories (GOROOT, the module cache, /usr), never the project or $FLUFFY_HOME")
			}
		}
	}
	tcs = append(tcs, venvToolchains(project, home, userHome, hostRoot, tcs, log)...)
	if venv != "" {
		named, err := namedVenvToolchains(venv, project, home, userHome, hostRoot, tcs, log)
		if err != nil {
			return nil, err
		}
		tcs = append(tcs, named...)
	}
	if node, ok := nodeToolchain(os.Getenv("PATH"), project, home, userHome, hostRoot, tcs, log); ok {
		tcs = append(tcs, node)
	}
	return tcs, nil
}

func overlaps(a, b string) bool {
	a, b = filepath.Clean(a), filepath.Clean(b)
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}
