package archdoc

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestArchitectureTableMatchesGoList: every package `go list ./...` reports
// has a row in docs/architecture.md, and every row names a package.
func TestArchitectureTableMatchesGoList(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start, end := strings.Index(text, "<!-- packages:start -->"), strings.Index(text, "<!-- packages:end -->")
	if start < 0 || end < start {
		t.Fatal("docs/architecture.md has no <!-- packages:start --> ... <!-- packages:end --> table")
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(text[start:end], -1) {
		if documented[m[1]] {
			t.Errorf("%s is listed twice", m[1])
		}
		documented[m[1]] = true
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/fluffy-waffle/fluffy/"
	var missing []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(p, module)
		if !documented[rel] {
			missing = append(missing, rel)
		}
		delete(documented, rel)
	}
	var stale []string
	for p := range documented {
		stale = append(stale, p)
	}
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("packages without a row in docs/architecture.md: %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("rows in docs/architecture.md naming no package: %v", stale)
	}
}
