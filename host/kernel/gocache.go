package kernel

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/sandbox"
)

// EnvHostGoCache overrides which host directory is the Go build cache
// the project's cache is layered over ("off": none). Unset, it is the
// host's `go env GOCACHE`.
const EnvHostGoCache = "FLUFFY_HOST_GOCACHE"

// HostGoCache finds the host's Go build cache for sandboxes to read
// under the project's own (BuildCacheDir): FLUFFY_HOST_GOCACHE, else
// GOCACHE, else what `go env GOCACHE` prints (only when the kernel runs
// on the host itself), else the user cache directory's go-build. It is
// zero when that is off, not a directory, or overlaps the project or
// $FLUFFY_HOME: the sandbox then builds on the project's cache alone.
func HostGoCache(getenv func(string) string, home, project, hostRoot string, log hclog.Logger) sandbox.Toolchain {
	onHost := hostRoot == "" || hostRoot == "/"
	dir, from := getenv(EnvHostGoCache), EnvHostGoCache
	if dir == "" {
		dir, from = getenv("GOCACHE"), "GOCACHE"
	}
	if dir == "" && onHost {
		dir, from = goEnvGOCACHE(), "go env GOCACHE"
	}
	if dir == "" {
		if c, err := os.UserCacheDir(); err == nil {
			dir, from = filepath.Join(c, "go-build"), "the user cache directory"
		}
	}
	if dir == "" || dir == "off" || !filepath.IsAbs(dir) {
		log.Debug("no host Go build cache to layer under the project's", "value", dir, "from", from)
		return sandbox.Toolchain{}
	}
	dir = filepath.Clean(dir)
	for _, private := range []string{project, home} {
		if p, err := filepath.Abs(private); err == nil && private != "" && overlaps(dir, p) {
			log.Debug("host Go build cache overlaps a directory sandboxes must not see; not layered", "dir", dir, "overlaps", p)
			return sandbox.Toolchain{}
		}
	}
	tc := sandbox.Toolchain{Path: dir}
	if !onHost {
		tc.Local = filepath.Join(hostRoot, dir)
	}
	local := tc.Path
	if tc.Local != "" {
		local = tc.Local
	}
	if fi, err := os.Stat(local); err != nil || !fi.IsDir() {
		log.Debug("host Go build cache absent; not layered", "dir", dir, "from", from)
		return sandbox.Toolchain{}
	}
	return tc
}

// goEnvGOCACHE asks the host's go command, from the root directory so
// no go.mod's toolchain line makes it switch (or download) toolchains.
func goEnvGOCACHE() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "env", "GOCACHE")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
