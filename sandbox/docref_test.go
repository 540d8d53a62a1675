package sandbox

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestPluginYAMLTemplateTable: the templates table of docs/plugin-yaml.md
// gives each template's limits and policy opt-in as Templates() has them.
func TestPluginYAMLTemplateTable(t *testing.T) {
	b, err := os.ReadFile("../docs/plugin-yaml.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 10 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[name] = cells[1:]
	}
	for name, tpl := range Templates() {
		r, ok := rows[name]
		if !ok {
			t.Errorf("template %s has no row", name)
			continue
		}
		mem := fmt.Sprintf("%dMiB", tpl.Limits.MemoryBytes>>20)
		if tpl.Limits.MemoryBytes%(1<<30) == 0 {
			mem = fmt.Sprintf("%dGiB", tpl.Limits.MemoryBytes>>30)
		}
		out := fmt.Sprintf("%dMiB", tpl.Limits.OutBytes>>20)
		if tpl.Limits.OutBytes%(1<<30) == 0 {
			out = fmt.Sprintf("%dGiB", tpl.Limits.OutBytes>>30)
		}
		want := []string{mem, fmt.Sprint(tpl.Limits.CPUs), fmt.Sprint(tpl.Limits.Pids), tpl.Limits.Timeout.String(), out}
		got := r[2:7]
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("template %s: the doc says %v, the code %v", name, got, want)
				break
			}
		}
		if opt := strings.Contains(r[7], "opts in"); opt != tpl.RequiresPolicy {
			t.Errorf("template %s: doc says policy opt-in %v, code %v", name, opt, tpl.RequiresPolicy)
		}
		if net := r[1] == "none"; net != (tpl.Network == NetNone) {
			t.Errorf("template %s: doc network %q, code %s", name, r[1], tpl.Network)
		}
	}
}
