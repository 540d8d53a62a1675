package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// CheckManifest fails t when the tools impl serves and the tools of the
// plugin.yaml at manifest differ: names, summaries, output modes, lifetimes
// or parameter schemas (compared as JSON values). The kernel validates
// arguments against plugin.yaml's schema before a call reaches the plugin,
// so the two must be one schema written twice; this check is what keeps
// them one.
//
//	func TestManifest(t *testing.T) { plugintest.CheckManifest(t, New(), "plugin.yaml") }
func CheckManifest(t testing.TB, impl tool.Plugin, manifest string) {
	t.Helper()
	if problems := ManifestProblems(impl, manifest); len(problems) > 0 {
		t.Fatalf("%s and the plugin's tools differ:\n  %s\nfix: make plugin.yaml's tools and the Go tool definitions identical", manifest, strings.Join(problems, "\n  "))
	}
}

// ManifestProblems lists the differences CheckManifest reports.
func ManifestProblems(impl tool.Plugin, manifest string) []string {
	data, err := os.ReadFile(manifest)
	if err != nil {
		return []string{err.Error()}
	}
	// An unstamped manifest (sha256: "") is fine here: only tools matter.
	if stamped, err := manifests.StampSHA256(data, strings.Repeat("0", 64)); err == nil && bytes.Contains(data, []byte(`sha256: ""`)) {
		data = stamped
	}
	m, err := manifests.Parse(manifest, data)
	if err != nil {
		return []string{err.Error()}
	}
	defs, err := impl.Tools(context.Background())
	if err != nil {
		return []string{"Tools: " + err.Error()}
	}
	var problems []string
	served := map[string]tool.Def{}
	for _, d := range defs {
		served[d.Name] = d
	}
	for _, mt := range m.Tools {
		d, ok := served[mt.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("tool %s is in plugin.yaml but the plugin does not serve it", mt.Name))
			continue
		}
		delete(served, mt.Name)
		if d.Summary != mt.Summary {
			problems = append(problems, fmt.Sprintf("tool %s: summary %q in Go, %q in plugin.yaml", mt.Name, d.Summary, mt.Summary))
		}
		if d.OutputMode != "" && d.OutputMode != mt.OutputMode {
			problems = append(problems, fmt.Sprintf("tool %s: output_mode %s in Go, %s in plugin.yaml", mt.Name, d.OutputMode, mt.OutputMode))
		}
		if d.Lifetime != "" && mt.Lifetime != "" && d.Lifetime != mt.Lifetime {
			problems = append(problems, fmt.Sprintf("tool %s: lifetime %s in Go, %s in plugin.yaml", mt.Name, d.Lifetime, mt.Lifetime))
		}
		var goSchema, yamlSchema any
		if err := json.Unmarshal(d.Parameters, &goSchema); err != nil {
			problems = append(problems, fmt.Sprintf("tool %s: the Go parameters are not JSON: %v", mt.Name, err))
			continue
		}
		_ = json.Unmarshal(mt.ParametersJSON, &yamlSchema)
		if !reflect.DeepEqual(goSchema, yamlSchema) {
			problems = append(problems, fmt.Sprintf("tool %s: parameters differ\n    Go:          %s\n    plugin.yaml: %s", mt.Name, canonical(goSchema), mt.ParametersJSON))
		}
	}
	extra := make([]string, 0, len(served))
	for n := range served {
		extra = append(extra, n)
	}
	sort.Strings(extra)
	for _, n := range extra {
		problems = append(problems, fmt.Sprintf("the plugin serves %s, which plugin.yaml does not declare", n))
	}
	return problems
}

func canonical(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
