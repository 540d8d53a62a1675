package base

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	basepb "github.com/fluffy-waffle/fluffy/plugins/base/proto"
)

// The API range the kernel speaks ("Version Compatibility": the
// latest two versions). v2 changed the tool kind; see plugins/CHANGELOG.md.
const (
	APIVersionMin = 1
	APIVersionMax = 2
)

// The magic cookie is not a security measure: it only makes a plugin binary
// refuse to run when launched by something other than fluffy.
const (
	MagicCookieKey   = "FLUFFY_PLUGIN"
	MagicCookieValue = "6f1c2d0a-fluffy-plugin-host-7be3"
)

// Handshake returns the go-plugin handshake for the kernel's current API.
// With VersionedPlugins set, go-plugin negotiates the version itself and the
// ProtocolVersion here is only the fallback.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  APIVersionMax,
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}

// SupportedAPIVersions lists the versions the kernel accepts, oldest first.
func SupportedAPIVersions() []int {
	out := make([]int, 0, APIVersionMax-APIVersionMin+1)
	for v := APIVersionMin; v <= APIVersionMax; v++ {
		out = append(out, v)
	}
	return out
}

// Kind is a plugin kind.
type Kind string

const (
	KindTool     Kind = "tool"
	KindProvider Kind = "provider"
	KindRuntime  Kind = "runtime"
	KindVCS      Kind = "vcs"
	KindPolicy   Kind = "policy"
)

// Info is a plugin's self-description.
type Info struct {
	Name        string `json:"name"`
	Kind        Kind   `json:"kind"`
	Version     string `json:"version"`
	APIVersions []int  `json:"api_versions"`
}

// Speaks reports whether the plugin claims API version v.
func (i Info) Speaks(v int) bool { return slices.Contains(i.APIVersions, v) }

// Config is what the kernel sends once after the handshake.
type Config struct {
	ConfigJSON     []byte
	SessionID      string
	InstanceID     string
	Workspace      string
	OutDir         string
	SessionMode    string
	APIVersion     int
	KernelBrokerID uint32
}

// Plugin is the part of every plugin implementation the base service calls.
type Plugin interface {
	Info() Info
	// Configure receives the kernel's configuration; kernel is nil when the
	// kernel offered no callback service.
	Configure(ctx context.Context, cfg Config, kernel KernelClient) error
	Health(ctx context.Context) error
}

// ErrorToProto converts an error into the wire Error (nil for nil).
func ErrorToProto(err error) *basepb.Error {
	if err == nil {
		return nil
	}
	e := uerr.From(err)
	return &basepb.Error{Code: e.Code, What: e.What, Why: e.Why, Fix: e.Fix}
}

// ErrorFromProto converts the wire Error a plugin sent into a *uerr.Error
// (nil for nil) the kernel can show: built by uerr.FromPlugin, so the code
// is in the plugin's namespace and every field is escaped and bounded.
// The plugin's name is uerr.UnknownPlugin until the supervisor sets it.
func ErrorFromProto(p *basepb.Error) *uerr.Error {
	if p == nil {
		return nil
	}
	return uerr.FromPlugin(uerr.UnknownPlugin, p.GetCode(), p.GetWhat(), p.GetWhy(), p.GetFix())
}

// errorFromKernel converts the wire Error the kernel sent a plugin: the
// kernel's own codes, kept as they are (plugin side only).
func errorFromKernel(p *basepb.Error) *uerr.Error {
	if p == nil {
		return nil
	}
	code := p.GetCode()
	if code == "" {
		code = "KERNEL_ERROR"
	}
	return uerr.New(code, p.GetWhat(), p.GetWhy(), p.GetFix())
}

// CodeMalformed marks a protocol violation by a plugin.
const CodeMalformed = "PLUGIN_MALFORMED_RESPONSE"

// MalformedError is returned when a plugin sends something that does not
// follow the protocol. Callers treat it like a crash.
func MalformedError(plugin, detail string) *uerr.Error {
	return uerr.New(CodeMalformed,
		fmt.Sprintf("plugin %s sent a malformed response", plugin),
		detail,
		"this is a bug in the plugin; report it to its author or disable it with `fluffy plugin disable "+plugin+" --reason ...`")
}
