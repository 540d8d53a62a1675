package conformance

import (
	"strings"

	"github.com/fluffy-waffle/fluffy/conformance/spec"
	"github.com/fluffy-waffle/fluffy/host/registry"
)

// The catalogue and the report live in the leaf package spec, which plugin
// authors link without the kernel; these names let the runner and its
// kernel-side callers keep one import.
type (
	Level  = spec.Level
	Item   = spec.Item
	Status = spec.Status
	Result = spec.Result
	Report = spec.Report
)

const (
	SuiteVersion     = spec.SuiteVersion
	MUST             = spec.MUST
	SHOULD           = spec.SHOULD
	ProfileCore      = spec.ProfileCore
	ProfileTool      = spec.ProfileTool
	ProfileProvider  = spec.ProfileProvider
	ProfileRuntime   = spec.ProfileRuntime
	ProfileVCS       = spec.ProfileVCS
	ProfilePolicy    = spec.ProfilePolicy
	Pass             = spec.Pass
	Fail             = spec.Fail
	Skip             = spec.Skip
	NotApplicable    = spec.NotApplicable
	MarkdownBegin    = spec.MarkdownBegin
	MarkdownEnd      = spec.MarkdownEnd
	EnvRequireDocker = spec.EnvRequireDocker
)

// Catalogue is spec.Catalogue.
func Catalogue() []Item { return spec.Catalogue() }

// ProfilesFor is spec.ProfilesFor.
func ProfilesFor(kind string) []string { return spec.ProfilesFor(kind) }

// KnownProfile is spec.KnownProfile.
func KnownProfile(p string) bool { return spec.KnownProfile(p) }

// CatalogueMarkdown is spec.CatalogueMarkdown.
func CatalogueMarkdown() string { return spec.CatalogueMarkdown() }

// Certification is the registry's record of a run. It is here rather than
// a method of Report because the registry is kernel side.
func Certification(r *Report) registry.Certification {
	return registry.Certification{
		SuiteVersion: r.SuiteVersion, SHA256: r.SHA256, Passed: r.Passed(), Profiles: r.Profiles,
		Failed: r.FailedMUST(), Skipped: r.SkippedMUST(), At: r.Started.UTC(), Summary: r.Summary(),
		Sandbox: r.Sandbox,
	}
}

// firstLine is the first line of s.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
