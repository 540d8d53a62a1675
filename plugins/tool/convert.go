package tool

import (
	"github.com/fluffy-waffle/fluffy/plugins/base"
	toolv1 "github.com/fluffy-waffle/fluffy/plugins/tool/proto/v1"
	toolv2 "github.com/fluffy-waffle/fluffy/plugins/tool/proto/v2"
)

// The v1 and v2 messages are deliberately separate types (each released
// .proto is immutable), so conversion is written out per version.

func defsToV1(ds []Def) []*toolv1.ToolDef {
	out := make([]*toolv1.ToolDef, len(ds))
	for i, d := range ds {
		out[i] = &toolv1.ToolDef{Name: d.Name, Summary: d.Summary, ParametersSchema: d.Parameters, OutputMode: d.OutputMode, Lifetime: d.Lifetime}
	}
	return out
}

func defsFromV1(ps []*toolv1.ToolDef) []Def {
	out := make([]Def, len(ps))
	for i, p := range ps {
		out[i] = Def{Name: p.GetName(), Summary: p.GetSummary(), Parameters: p.GetParametersSchema(), OutputMode: p.GetOutputMode(), Lifetime: p.GetLifetime()}
	}
	return out
}

func defsToV2(ds []Def) []*toolv2.ToolDef {
	out := make([]*toolv2.ToolDef, len(ds))
	for i, d := range ds {
		out[i] = &toolv2.ToolDef{Name: d.Name, Summary: d.Summary, ParametersSchema: d.Parameters, OutputMode: d.OutputMode, Lifetime: d.Lifetime}
	}
	return out
}

func defsFromV2(ps []*toolv2.ToolDef) []Def {
	out := make([]Def, len(ps))
	for i, p := range ps {
		out[i] = Def{Name: p.GetName(), Summary: p.GetSummary(), Parameters: p.GetParametersSchema(), OutputMode: p.GetOutputMode(), Lifetime: p.GetLifetime()}
	}
	return out
}

func resultToV1(r Result) *toolv1.ToolResult {
	out := &toolv1.ToolResult{Ok: r.OK, OutputJson: r.Output, Error: base.ErrorToProto(errOrNil(r))}
	for _, c := range r.Changes {
		out.Changes = append(out.Changes, &toolv1.FileChange{Path: c.Path, Mode: c.Mode, Artifact: c.Artifact, Sha256Before: c.SHA256Before, Sha256After: c.SHA256After, Delete: c.Delete})
	}
	return out
}

func resultFromV1(p *toolv1.ToolResult) Result {
	r := Result{OK: p.GetOk(), Output: p.GetOutputJson(), Err: base.ErrorFromProto(p.GetError())}
	for _, c := range p.GetChanges() {
		r.Changes = append(r.Changes, FileChange{Path: c.GetPath(), Mode: c.GetMode(), Artifact: c.GetArtifact(), SHA256Before: c.GetSha256Before(), SHA256After: c.GetSha256After(), Delete: c.GetDelete()})
	}
	return r
}

func resultToV2(r Result) *toolv2.ToolResult {
	out := &toolv2.ToolResult{Ok: r.OK, OutputJson: r.Output, Error: base.ErrorToProto(errOrNil(r)), Cancelled: r.Cancelled}
	for _, c := range r.Changes {
		out.Changes = append(out.Changes, &toolv2.FileChange{Path: c.Path, Mode: c.Mode, Artifact: c.Artifact, Sha256Before: c.SHA256Before, Sha256After: c.SHA256After, Delete: c.Delete})
	}
	return out
}

func resultFromV2(p *toolv2.ToolResult) Result {
	r := Result{OK: p.GetOk(), Output: p.GetOutputJson(), Err: base.ErrorFromProto(p.GetError()), Cancelled: p.GetCancelled()}
	for _, c := range p.GetChanges() {
		r.Changes = append(r.Changes, FileChange{Path: c.GetPath(), Mode: c.GetMode(), Artifact: c.GetArtifact(), SHA256Before: c.GetSha256Before(), SHA256After: c.GetSha256After(), Delete: c.GetDelete()})
	}
	return r
}

// errOrNil avoids the typed-nil trap: a nil *uerr.Error must become a nil error.
func errOrNil(r Result) error {
	if r.Err == nil {
		return nil
	}
	return r.Err
}
