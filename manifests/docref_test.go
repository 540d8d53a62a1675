package manifests

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// docRows returns, per heading of docs/plugin-yaml.md, the first cells
// (`x`) of its table rows.
func docRows(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../docs/plugin-yaml.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	out := map[string][]string{}
	section := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "#") {
			section = strings.TrimSpace(strings.TrimLeft(l, "#"))
			continue
		}
		if m := row.FindStringSubmatch(l); m != nil {
			out[section] = append(out[section], m[1])
		}
	}
	return out
}

func prefixed(p string, fs []string) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = p + f
	}
	return out
}

// TestPluginYAMLReferenceMatchesTheParser: docs/plugin-yaml.md lists every
// field the parser accepts and no other, every template and kind, and the
// tags the kernel gives meaning to, so the reference cannot
// drift from the code.
func TestPluginYAMLReferenceMatchesTheParser(t *testing.T) {
	rows := docRows(t)
	for section, want := range map[string][]string{
		"Top-level fields":           topFields,
		"`sandbox`":                  prefixed("sandbox.", sandboxFields),
		"`tools` (tool kind)":        prefixed("tools[].", toolFields),
		"`tools[].paths`":            prefixed("tools[].paths[].", pathDeclFields),
		"`provider` (provider kind)": prefixed("provider.", providerFields),
		"Templates":                  slices.DeleteFunc(Templates(), func(s string) bool { return s == TemplateNone }),
		"`tags`":                     {TagCorePlugin, TagThirdParty, TagTrustedWrite},
	} {
		got := slices.Clone(rows[section])
		w := slices.Clone(want)
		sort.Strings(got)
		sort.Strings(w)
		if !slices.Equal(got, w) {
			t.Errorf("docs/plugin-yaml.md section %q lists %v, the parser has %v", section, got, w)
		}
	}
	b, _ := os.ReadFile("../docs/plugin-yaml.md")
	for _, k := range Kinds() {
		if !strings.Contains(string(b), "`"+k+"`") {
			t.Errorf("docs/plugin-yaml.md does not name the kind %s", k)
		}
	}
}
