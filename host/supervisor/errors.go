package supervisor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
)

// Error codes callers branch on (through uerr.HasCode).
const (
	CodeAPIVersion       = "PLUGIN_API_VERSION"
	CodeChecksum         = "PLUGIN_CHECKSUM_MISMATCH"
	CodeStartTimeout     = "PLUGIN_START_TIMEOUT"
	CodeHandshakeGarbled = "PLUGIN_HANDSHAKE_GARBLED"
	CodeHandshakeFailed  = "PLUGIN_HANDSHAKE_FAILED"
	// CodeRuntimeUnreachable: a sandbox could not be created because the
	// container engine does not answer (the code sandbox uses at start).
	CodeRuntimeUnreachable = "RUNTIME_UNREACHABLE"
	CodeInfoMismatch       = "PLUGIN_INFO_MISMATCH"
	CodeCrashed            = "PLUGIN_CRASHED"
	CodeCallTimeout        = "PLUGIN_CALL_TIMEOUT"
	CodeCircuitOpen        = "PLUGIN_CIRCUIT_OPEN"
	CodeUnknownPlugin      = "PLUGIN_UNKNOWN"
	CodeKindUnsupported    = "PLUGIN_KIND_UNSUPPORTED"
	CodeResponseTooLarge   = "PLUGIN_RESPONSE_TOO_LARGE"
)

// APIVersionError says a plugin and the kernel share no API version. It is
// the same error whether it was found from the manifest (before launch) or
// at the handshake (the manifest lied).
type APIVersionError struct {
	Plugin         string
	PluginVersions []int
	KernelMin      int
	KernelMax      int
	// AtHandshake is true when the manifest claimed a compatible version but
	// the running binary did not offer one.
	AtHandshake bool
}

func (e *APIVersionError) user() *uerr.Error {
	vs := make([]string, len(e.PluginVersions))
	for i, v := range e.PluginVersions {
		vs[i] = fmt.Sprint(v)
	}
	why := fmt.Sprintf("plugin %s speaks API versions [%s]; this kernel supports [%d,%d]",
		e.Plugin, strings.Join(vs, ","), e.KernelMin, e.KernelMax)
	if e.AtHandshake {
		why += " (found at the handshake: the plugin's manifest claims a version its binary does not offer)"
	}
	fix := fmt.Sprintf("install a release of %s built for plugin API %d or %d; its author builds it with this fluffy's pluginsdk", e.Plugin, e.KernelMin, e.KernelMax)
	if len(e.PluginVersions) > 0 && slices.Min(e.PluginVersions) > e.KernelMax {
		// Newer than this kernel: either fluffy is old or the manifest claims
		// a version no release defines. Say both, for whoever reads it.
		fix = fmt.Sprintf("API %d is newer than this fluffy's newest (%d): if a newer fluffy release supports it, upgrade fluffy; "+
			"otherwise the manifest is wrong (plugin author: declare in api_versions only what the binary serves, e.g. [%d, %d] with this pluginsdk)",
			slices.Min(e.PluginVersions), e.KernelMax, e.KernelMin, e.KernelMax)
	}
	return uerr.New(CodeAPIVersion, fmt.Sprintf("plugin %s is not compatible with this fluffy", e.Plugin), why, fix)
}

func (e *APIVersionError) Error() string { return e.user().Error() }

// Unwrap exposes the user-facing form so uerr.From/HasCode see it.
func (e *APIVersionError) Unwrap() error { return e.user() }

// CheckAPIVersions is the pre-launch check: it fails when versions and the
// kernel's range do not overlap.
func CheckAPIVersions(plugin string, versions []int) error {
	for _, v := range versions {
		if v >= base.APIVersionMin && v <= base.APIVersionMax {
			return nil
		}
	}
	return &APIVersionError{Plugin: plugin, PluginVersions: versions, KernelMin: base.APIVersionMin, KernelMax: base.APIVersionMax}
}
