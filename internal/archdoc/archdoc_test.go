package archdoc

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// TestHostEdgesStayCut: host packages that once imported another for one
// type or error stay free of it (the consumer declares what it needs).
func TestHostEdgesStayCut(t *testing.T) {
	const module = "github.com/fluffy-waffle/fluffy/"
	for _, c := range []struct{ pkg, notOn, why string }{
		{"host/router", "host/state", "the router needs only the gate's review answer, not the workflow machine"},
		{"host/workspace", "host/router", "the workspace ingests a proposal (host/proposal), it does not route calls"},
		{"host/state", "host/scheduler", "a stage's scheduler task type is decided by whoever submits it"},
		{"host/callbacks", "host/kernel", "the callback service declares what it needs of the kernel"},
		{"host/task", "host/kernel", "the task runner is opened by the kernel over the dependencies task.Deps declares"},
	} {
		t.Run(c.pkg, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "./"+c.pkg)
			cmd.Dir = filepath.Join("..", "..")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v", c.pkg, err)
			}
			deps := strings.Fields(string(out))
			// The listing must name the package itself, or an empty answer would pass.
			if !slices.Contains(deps, module+c.pkg) {
				t.Fatalf("go list -deps does not list %s; the check would prove nothing", c.pkg)
			}
			if slices.Contains(deps, module+c.notOn) {
				t.Errorf("%s depends on %s: %s", c.pkg, c.notOn, c.why)
			}
		})
	}
}

// TestCommandImportsNoKernelPart: cmd/fluffy parses arguments, talks to
// the kernel and renders; what the kernel's parts do is reached through
// host/kernelapi (its one entry point, which `fluffy kernel` also runs)
// and the small host packages serving one verb family, never directly.
func TestCommandImportsNoKernelPart(t *testing.T) {
	const module = "github.com/fluffy-waffle/fluffy/"
	cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./cmd/fluffy")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./cmd/fluffy: %v", err)
	}
	imports := strings.Fields(string(out))
	// The entry point must be there, or an empty answer would pass.
	if !slices.Contains(imports, module+"host/kernelapi") {
		t.Fatalf("cmd/fluffy does not import host/kernelapi; the check would prove nothing:\n%s", out)
	}
	for _, c := range []struct{ pkg, why string }{
		{"host/kernel", "the kernel is built and served by host/kernelapi, its one entry point"},
		{"host/store", "the databases are the kernel's; the audit verbs ask it (host/kernelapi)"},
		{"host/audit", "the audit verbs read through host/kernelapi, policy records go through host/policyverbs"},
		{"host/state", "modes change in the kernel (session.mode)"},
		{"host/router", "a tool call goes through host/kernelapi's local kernel"},
		{"host/workspace", "the changeset is the kernel's (session.undo)"},
		{"host/merge", "merges happen in the kernel"},
		{"policy", "the engine is used by host/policyverbs"},
		{"sandbox", "the engine's resources are reached through host/sandboxadmin"},
	} {
		t.Run(c.pkg, func(t *testing.T) {
			if slices.Contains(imports, module+c.pkg) {
				t.Errorf("cmd/fluffy imports %s: %s", c.pkg, c.why)
			}
		})
	}
}

// TestLeavesLiveInLib: the shared leaves (what the kernel and the plugins
// both use) have one home, lib/, and stay leaves: a lib package imports no
// fluffy package outside lib/, and no package outside lib/ is imported by
// both the kernel (host/) and a plugin (builtin-plugins/) unless it is a
// contract (plugins/, pluginsdk/) or a leaf in lib/.
func TestLeavesLiveInLib(t *testing.T) {
	const module = "github.com/fluffy-waffle/fluffy/"
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	usedBy := map[string]map[string]bool{} // imported package -> importing sides
	libs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		side := strings.SplitN(pkg, "/", 2)[0]
		if side == "lib" {
			libs++
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			if side == "lib" && !strings.HasPrefix(imp, "lib/") {
				t.Errorf("%s imports %s: a leaf imports only other leaves", pkg, imp)
			}
			if usedBy[imp] == nil {
				usedBy[imp] = map[string]bool{}
			}
			usedBy[imp][side] = true
		}
	}
	if libs == 0 {
		t.Fatalf("go list names no lib/ package; the check would prove nothing:\n%s", out)
	}
	for imp, sides := range usedBy {
		top := strings.SplitN(imp, "/", 2)[0]
		if sides["host"] && sides["builtin-plugins"] && top != "lib" && top != "plugins" && top != "pluginsdk" {
			t.Errorf("%s is used by the kernel and by plugins: a shared leaf lives in lib/, a contract in plugins/ or pluginsdk/", imp)
		}
	}
}
