package registry

import (
	"slices"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// State is a plugin's lifecycle state.
//
// The registry lives in $FLUFFY_HOME and is shared by every kernel of the
// user, so it records only what holds for the installed version itself:
// registered (usable), disabled (by the user) or rejected (a kernel refused
// to load it). Whether an instance is loaded, active or unloaded belongs to
// one kernel (kernel.Kernel.PluginState), never to this shared record.
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

// normalize maps a per-kernel state that an older fluffy wrote into the
// shared record back to registered, so a listing has one meaning.
func (r *Record) normalize() {
	switch r.State {
	case StateLoaded, StateActive, StateUnloaded, StateDiscovered:
		r.State = StateRegistered
	}
}

// Tags with meaning to the kernel. core_plugin and third_party are derived
// from where a plugin comes from; every other tag (trusted_write, or any tag
// a policy rule matches with caller_tag) reaches the policy only when the
// user granted it. A manifest's tags are requests.
const (
	TagCore         = "core_plugin"
	TagTrustedWrite = "trusted_write"
	TagThirdParty   = "third_party"
)

// KernelName is the plugin name under which the kernel serves its own
// tools; it is reserved like a builtin's.
const KernelName = "kernel"

// BuiltinNames are the plugins fluffy ships (builtin-plugins/). Their names
// are reserved: a plugin from anywhere else may not take one, and when both
// exist the builtin is the one that runs.
func BuiltinNames() []string {
	return []string{
		"provider-anthropic", "provider-openai", "provider-replay", "runtime-docker",
		"tool-fs", "tool-mcp", "tool-search", "tool-shell", "tool-test", "vcs-git",
	}
}

// Grantable reports whether the user may grant tag: any well-formed tag but
// the two the kernel derives itself.
func Grantable(tag string) bool {
	return tag != TagCore && tag != TagThirdParty && manifests.ValidTag(tag)
}

// EffectiveTags are the tags the kernel gives the policy for a plugin: a
// builtin's manifest tags plus core_plugin; for anything else third_party
// plus what the user granted. Requested-but-not-granted tags never count.
func EffectiveTags(builtin bool, requested, granted []string) []string {
	var out []string
	add := func(t string) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if builtin {
		add(TagCore)
		for _, t := range requested {
			if t != TagThirdParty {
				add(t)
			}
		}
	} else {
		add(TagThirdParty)
	}
	for _, t := range granted {
		if Grantable(t) {
			add(t)
		}
	}
	return out
}

// Certification is the conformance suite's verdict on one binary, for one
// set of profiles, by one suite version. Passed means every MUST item of
// those profiles that applies passed: none failed, none was skipped.
type Certification struct {
	SuiteVersion string   `json:"suite_version"`
	SHA256       string   `json:"sha256"`
	Passed       bool     `json:"passed"`
	Profiles     []string `json:"profiles"`
	Failed       []string `json:"failed,omitempty"`  // IDs of failed MUST items
	Skipped      []string `json:"skipped,omitempty"` // IDs of MUST items not checked
	// Sandbox says where the plugin ran ("container (every item)", …).
	Sandbox string    `json:"sandbox,omitempty"`
	Forced  bool      `json:"forced,omitempty"` // installed with --force despite failures
	At      time.Time `json:"at"`
	Summary string    `json:"summary"`
}

// Record is what the registry knows about one plugin version, or about one
// rejected manifest.
type Record struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Kind        string `json:"kind"`
	Description string `json:"description,omitempty"`
	Author      string `json:"author,omitempty"`
	State       State  `json:"state"`
	// Tags are the effective tags (EffectiveTags): what the policy sees.
	Tags []string `json:"tags"`
	// RequestedTags are the manifest's tags: shown at consent, never
	// effective by themselves for a plugin that is not builtin.
	RequestedTags []string `json:"requested_tags,omitempty"`
	// GrantedTags are the tags the user granted (install --grant, the
	// consent question, `fluffy plugin grant`); each grant is audited.
	GrantedTags []string `json:"granted_tags,omitempty"`
	// Builtin: the plugin comes from one of fluffy's builtin plugin
	// directories (trusted by where it lives, not by what it claims).
	Builtin     bool   `json:"builtin,omitempty"`
	APIVersions []int  `json:"api_versions"`
	SHA256      string `json:"sha256"`
	// EntryStamp identifies the entry file as it was when its sha256 was
	// last verified (manifests.VerifyChecksumSince); a scan that finds the
	// same stamp does not hash the binary again.
	EntryStamp string `json:"entry_stamp,omitempty"`
	// Dir is where the plugin lives in the store; ManifestPath its plugin.yaml.
	Dir          string `json:"dir,omitempty"`
	ManifestPath string `json:"manifest_path"`
	// Source is the path it was installed from.
	Source string `json:"source,omitempty"`
	// Reason explains REJECTED and DISABLED.
	Reason       string   `json:"reason,omitempty"`
	ErrorCode    string   `json:"error_code,omitempty"`
	Tools        []string `json:"tools,omitempty"`
	Capabilities []string `json:"required_capabilities,omitempty"`
	Template     string   `json:"sandbox_template,omitempty"`
	// Certification is the strongest of Certifications (see
	// AddCertification): the one install, `plugin list` and the audit log
	// speak of.
	Certification *Certification `json:"certification,omitempty"`
	// Certifications holds one verdict per (suite version, profiles,
	// sha256): a run never overwrites a run of another scope.
	Certifications []Certification `json:"certifications,omitempty"`
	InstalledAt    time.Time       `json:"installed_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

// sameScope reports whether a and b certify the same thing: the same
// binary, the same profile set, the same suite version.
func sameScope(a, b Certification) bool {
	pa, pb := slices.Clone(a.Profiles), slices.Clone(b.Profiles)
	slices.Sort(pa)
	slices.Sort(pb)
	return a.SuiteVersion == b.SuiteVersion && strings.EqualFold(a.SHA256, b.SHA256) && slices.Equal(pa, pb)
}

// AddCertification records c: it replaces an earlier verdict of the same
// scope (suite version, profile set, sha256) and keeps every other. The
// record's Certification becomes the strongest verdict for the recorded
// binary: the one covering the most profiles, the most recent among equals.
// So a `--profile core` run never replaces a core+tool certification, and
// a newer run of the same scope replaces the older one, pass or fail.
func (r *Record) AddCertification(c Certification) {
	if r.Certification != nil && !slices.ContainsFunc(r.Certifications, func(x Certification) bool { return sameScope(x, *r.Certification) }) {
		// A record written before Certifications existed.
		r.Certifications = append(r.Certifications, *r.Certification)
	}
	r.Certifications = slices.DeleteFunc(r.Certifications, func(x Certification) bool { return sameScope(x, c) })
	r.Certifications = append(r.Certifications, c)
	var best *Certification
	for i := range r.Certifications {
		x := &r.Certifications[i]
		if r.SHA256 != "" && !strings.EqualFold(x.SHA256, r.SHA256) {
			continue
		}
		if best == nil || len(x.Profiles) > len(best.Profiles) || (len(x.Profiles) == len(best.Profiles) && !x.At.Before(best.At)) {
			best = x
		}
	}
	if best == nil {
		best = &r.Certifications[len(r.Certifications)-1]
	}
	b := *best
	r.Certification = &b
}

// HasTag reports whether the record carries tag.
func (r Record) HasTag(tag string) bool { return slices.Contains(r.Tags, tag) }

// effectiveTags recomputes the record's tags from where it came from and
// what the user granted, so a record written before a rule changed (or
// edited by hand) cannot carry a self-granted tag into the policy.
func (r Record) effectiveTags() []string {
	return EffectiveTags(r.Builtin, r.RequestedTags, r.GrantedTags)
}

// Spec builds the supervisor's view of an installed plugin from its
// manifest in the store.
func Spec(m *manifests.Manifest) supervisor.Spec {
	s := supervisor.Spec{
		Name: m.Name, Version: m.Version, Kind: base.Kind(m.Kind), Binary: m.EntryPath(), SHA256: m.SHA256,
		APIVersions: m.APIVersions, Template: m.Sandbox.Template, Tags: m.Tags, Capabilities: m.RequiredCapabilities,
		Limits: manifestLimits(m),
	}
	// The limits it runs under: the template's, lowered where the manifest
	// asks (CheckSandbox refuses a manifest that raises one). The call
	// deadline is the template's timeout unless the manifest lowers it.
	if tpl, err := sandbox.LookupTemplate(m.Sandbox.Template); err == nil {
		s.Limits = tpl.Effective(s.Limits)
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
