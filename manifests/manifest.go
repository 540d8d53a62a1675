package manifests

import (
	"encoding/hex"
	"path/filepath"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fluffy-waffle/fluffy/lib/yamlpos"
)

// FileName is the manifest's file name inside a plugin directory.
const FileName = "plugin.yaml"

// MaxSize is the largest manifest accepted, in bytes.
const MaxSize = 1 << 20

// Plugin kinds (DESIGN.md "Plugins" → Kinds).
const (
	KindTool     = "tool"
	KindProvider = "provider"
	KindRuntime  = "runtime"
	KindVCS      = "vcs"
	KindPolicy   = "policy"
)

// Sandbox templates (L2 templates). TemplateNone means "not in a
// sandbox" and is only valid for runtime plugins, which create sandboxes.
const (
	TemplateAIProvider      = "ai-provider"
	TemplateCodeExecutor    = "code-executor"
	TemplatePolicySandbox   = "policy-sandbox"
	TemplateIntegrationTest = "integration-test"
	TemplateNone            = "none"
)

// Known tags. Other tags are allowed if they match the tag pattern.
const (
	TagCorePlugin   = "core_plugin"
	TagTrustedWrite = "trusted_write"
	TagThirdParty   = "third_party"
)

// Tool output modes and lifetimes.
const (
	OutputPatch     = "patch"
	OutputFull      = "full"
	LifetimeSession = "session"
	LifetimePerCall = "per_call"
)

// Kinds lists every plugin kind, in a stable order.
func Kinds() []string {
	return []string{KindTool, KindProvider, KindRuntime, KindVCS, KindPolicy}
}

// Templates lists every sandbox template name, in a stable order.
func Templates() []string {
	return []string{TemplateAIProvider, TemplateCodeExecutor, TemplatePolicySandbox, TemplateIntegrationTest, TemplateNone}
}

// DefaultTemplate is the sandbox template a plugin of this kind gets when its
// manifest names none.
func DefaultTemplate(kind string) string {
	switch kind {
	case KindTool, KindVCS:
		return TemplateCodeExecutor
	case KindProvider:
		return TemplateAIProvider
	case KindPolicy:
		return TemplatePolicySandbox
	case KindRuntime:
		return TemplateNone
	}
	return ""
}

// Manifest is one validated plugin.yaml.
type Manifest struct {
	Name                 string
	Version              string          // as written
	SemVer               *semver.Version // Version, parsed strictly
	Kind                 string
	Description          string
	Author               string
	Entry                string // relative, slash-separated, inside Dir
	SHA256               string // 64 lowercase hex digits
	APIVersions          []int
	Sandbox              Sandbox
	RequiredCapabilities []string
	Tags                 []string
	Tools                []Tool    // kind tool only
	Provider             *Provider // kind provider only; nil if absent

	// Dir is the absolute directory holding the manifest; Path the absolute
	// manifest file path.
	Dir  string
	Path string

	// file is the path as the caller gave it, used in error messages.
	file string
	// pos maps dotted field paths to their position in the file.
	pos map[string]yamlpos.Pos
	// bad marks fields the decoder already reported (only during Parse).
	bad map[string]bool
}

// Sandbox is the L2 sandbox a plugin asks for: a template plus optional
// overrides. A zero override means "the template's default".
type Sandbox struct {
	Template    string
	MemoryBytes int64
	CPUs        float64
	Pids        int
	Timeout     time.Duration
}

// Tool is one tool a tool plugin offers.
type Tool struct {
	Name       string
	Summary    string
	OutputMode string // OutputPatch or OutputFull
	Lifetime   string // LifetimeSession or LifetimePerCall
	// ParametersJSON is the parameters schema as canonical JSON (object keys
	// sorted), ready to hand to a model provider.
	ParametersJSON []byte
	// Paths declares which arguments are project paths and whether the
	// tool reads or writes them (see PathDecl).
	Paths []PathDecl

	schema *jsonschema.Schema
}

// Provider holds the provider-specific part of a manifest.
type Provider struct {
	// Network lists the host[:port] endpoints the provider needs; the
	// policy's allowlist decides whether it gets them.
	Network []string
}

// EntryPath returns the absolute path of the entry binary.
func (m *Manifest) EntryPath() string {
	return filepath.Join(m.Dir, filepath.FromSlash(m.Entry))
}

// HasTag reports whether the manifest carries tag.
func (m *Manifest) HasTag(tag string) bool {
	for _, t := range m.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// Tool returns the tool with the given name.
func (m *Manifest) Tool(name string) (Tool, bool) {
	for _, t := range m.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Checksum returns SHA256 decoded to bytes, the form go-plugin's
// SecureConfig.Checksum wants (nil if SHA256 is not valid hex).
func (m *Manifest) Checksum() []byte {
	b, err := hex.DecodeString(m.SHA256)
	if err != nil {
		return nil
	}
	return b
}

// SupportsAPI reports whether the manifest lists API version v.
func (m *Manifest) SupportsAPI(v int) bool {
	for _, a := range m.APIVersions {
		if a == v {
			return true
		}
	}
	return false
}
