package registry

import (
	"slices"
	"time"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// State is a plugin's lifecycle state (seed 000 "Plugin System Module").
type State string

const (
	StateDiscovered State = "discovered"
	StateRegistered State = "registered"
	StateRejected   State = "rejected"
	StateLoaded     State = "loaded"
	StateActive     State = "active"
	StateUnloaded   State = "unloaded"
	StateDisabled   State = "disabled"
)

// Tags with meaning to the kernel.
const (
	TagCore         = "core_plugin"
	TagTrustedWrite = "trusted_write"
	TagThirdParty   = "third_party"
)

// Certification is the conformance suite's verdict on one binary.
type Certification struct {
	SuiteVersion string    `json:"suite_version"`
	SHA256       string    `json:"sha256"`
	Passed       bool      `json:"passed"`
	Profiles     []string  `json:"profiles"`
	Failed       []string  `json:"failed,omitempty"` // IDs of failed MUST items
	Forced       bool      `json:"forced,omitempty"` // installed with --force despite failures
	At           time.Time `json:"at"`
	Summary      string    `json:"summary"`
}

// Record is what the registry knows about one plugin version, or about one
// rejected manifest.
type Record struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Kind        string   `json:"kind"`
	Description string   `json:"description,omitempty"`
	Author      string   `json:"author,omitempty"`
	State       State    `json:"state"`
	Tags        []string `json:"tags"`
	APIVersions []int    `json:"api_versions"`
	SHA256      string   `json:"sha256"`
	// Dir is where the plugin lives in the store; ManifestPath its plugin.yaml.
	Dir          string `json:"dir,omitempty"`
	ManifestPath string `json:"manifest_path"`
	// Source is the path it was installed from.
	Source string `json:"source,omitempty"`
	// Reason explains REJECTED and DISABLED.
	Reason        string         `json:"reason,omitempty"`
	ErrorCode     string         `json:"error_code,omitempty"`
	Tools         []string       `json:"tools,omitempty"`
	Capabilities  []string       `json:"required_capabilities,omitempty"`
	Template      string         `json:"sandbox_template,omitempty"`
	Certification *Certification `json:"certification,omitempty"`
	InstalledAt   time.Time      `json:"installed_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
}

// HasTag reports whether the record carries tag.
func (r Record) HasTag(tag string) bool { return slices.Contains(r.Tags, tag) }

// Spec builds the supervisor's view of an installed plugin from its
// manifest in the store.
func Spec(m *manifests.Manifest) supervisor.Spec {
	s := supervisor.Spec{
		Name: m.Name, Version: m.Version, Kind: base.Kind(m.Kind), Binary: m.EntryPath(), SHA256: m.SHA256,
		APIVersions: m.APIVersions, Template: m.Sandbox.Template, Tags: m.Tags, Capabilities: m.RequiredCapabilities,
		Limits: sandbox.Limits{MemoryBytes: m.Sandbox.MemoryBytes, CPUs: m.Sandbox.CPUs, Pids: m.Sandbox.Pids, Timeout: m.Sandbox.Timeout},
	}
	if m.Provider != nil {
		s.Network = m.Provider.Network
	}
	for _, t := range m.Tools {
		if t.Lifetime == "per_call" {
			s.PerCallTools = append(s.PerCallTools, t.Name)
		}
	}
	return s
}
