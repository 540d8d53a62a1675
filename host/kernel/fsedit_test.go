//go:build !race

// The file-tool scenarios run whole tasks in real containers with the
// task tests' helpers, which the race pass leaves out.

package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/task"
)

// These scenarios run the file tools models are trained on through the
// real kernel: provider-replay plays a scripted model, every call goes
// through the router (schema, workflow gate, policy per path), tool-fs
// runs in its docker sandbox, the changeset ingests the proposals (STALE
// checks, policy per changed path) and the strict workflow reviews, merges
// and commits.

// editProject writes files into a fresh directory for projectKernel.
func editProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runScripted(t *testing.T, src string, turns [][]scriptedCall) (*kernel.Kernel, *events, agent.DoneEvent, string) {
	t.Helper()
	data, err := os.ReadFile(scriptedCassette(t, turns))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]string{"cassette": string(data)})
	k, tasks, ws := projectKernel(t, src, "provider-replay", "replay", cfg)
	ev := &events{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done, err := tasks.Run(ctx, task.Request{Prompt: "fix it", Yes: true}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools: %v", ev.tools())
	if done.Status != agent.StatusDone {
		t.Fatalf("task ended %s: %s\ntools: %v\nstates: %v", done.Status, done.Reason, ev.tools(), ev.states())
	}
	return k, ev, done, ws
}

// toolErrors are the error texts the model got back, by call id.
func (e *events) toolErrors() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]string{}
	for _, ev := range e.all {
		if ev.Type == agent.EventToolResult && ev.Tool != nil && ev.Tool.Error != nil {
			out[ev.Tool.CallID] = ev.Tool.Error.Code + ": " + ev.Tool.Error.What + " / " + ev.Tool.Error.Why + " / " + ev.Tool.Error.Fix
		}
	}
	return out
}

func hostGoTest(t *testing.T, ws string) {
	t.Helper()
	cmd := exec.Command("go", "test", "./...")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the merged project's tests fail on the host: %v\n%s", err, out)
	}
}

// TestEditLargeFileByLineRanges: the model reads a 1 500-line file in two
// line ranges (the second under a mangled tool name the router repairs), has an ambiguous and an absent old_string refused with
// errors that name the lines, succeeds on the next turn, and changes two
// lines of the large file with one fs.edit call, test first.
func TestEditLargeFileByLineRanges(t *testing.T) {
	var big strings.Builder
	big.WriteString("package big\n\n")
	for i := 1; i <= 1498; i++ {
		fmt.Fprintf(&big, "func V%04d() int { return %d }\n", i, i)
	}
	test := "package big\n\nimport \"testing\"\n\nfunc TestV(t *testing.T) {\n\tif V0010() != 10 {\n\t\tt.Fatal(\"V0010\")\n\t}\n\tif V0020() != 20 {\n\t\tt.Fatal(\"V0020\")\n\t}\n}\n"
	src := editProject(t, map[string]string{"go.mod": "module example.com/big\n\ngo 1.22\n", "src/big.go": big.String(), "src/big_test.go": test})
	newCheck := "\tif V0020() != 20 {\n\t\tt.Fatal(\"V0020\")\n\t}\n\tif V0100() != 1000 || V1400() != 14000 {\n\t\tt.Fatal(\"V0100 and V1400 are scaled\")\n\t}\n"
	k, ev, _, ws := runScripted(t, src, [][]scriptedCall{
		{{"r1", "fs.read", map[string]any{"path": "src/big.go", "offset": 1, "limit": 120}}, {"r2", "functions.fs_read", map[string]any{"path": "src/big.go", "offset": 1390, "limit": 20}}},
		{{"p1", "plan.complete", map[string]any{"plan": "1. src/big_test.go: V0100 is 1000 and V1400 is 14000 (fails). 2. src/big.go: change those two lines. 3. Red, then green."}}},
		{{"e1", "fs.edit", map[string]any{"path": "src/big_test.go", "old_string": "\t}\n", "new_string": "\t}\n\t// more\n"}}},
		{{"e2", "fs.edit", map[string]any{"path": "src/big_test.go", "old_string": "\tif V0030() != 30 {", "new_string": "x"}}},
		{{"e3", "fs.edit", map[string]any{"path": "src/big_test.go", "old_string": "\tif V0020() != 20 {\n\t\tt.Fatal(\"V0020\")\n\t}\n", "new_string": newCheck}}, {"t1", "test.run", map[string]any{}}},
		{{"e4", "fs.edit", map[string]any{"path": "src/big.go", "edits": []map[string]any{
			{"old_string": "func V0100() int { return 100 }", "new_string": "func V0100() int { return 1000 }"},
			{"old_string": "func V1400() int { return 1400 }", "new_string": "func V1400() int { return 14000 }"}}}}, {"t2", "test.run", map[string]any{}}},
	})
	tl := strings.Join(ev.tools(), " ")
	for _, want := range []string{"fs.edit!FS_EDIT_AMBIGUOUS", "fs.edit!FS_EDIT_NOT_FOUND", "test.run=red", "test.run=green"} {
		if !strings.Contains(tl, want) {
			t.Fatalf("tool results %s lack %s", tl, want)
		}
	}
	errs := ev.toolErrors()
	if e := errs["e1"]; !strings.Contains(e, "2 times") || !strings.Contains(e, "lines 8, 11") || !strings.Contains(e, "replace_all") {
		t.Errorf("the ambiguous edit's error does not let the next turn succeed: %s", e)
	}
	if e := errs["e2"]; !strings.Contains(e, "closest line is 6") || !strings.Contains(e, `V0010() != 10`) {
		t.Errorf("the absent edit's error does not show the closest lines: %s", e)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "src/big.go"))
	ol, nl := strings.Split(big.String(), "\n"), strings.Split(string(got), "\n")
	var changed []int
	for i := range min(len(ol), len(nl)) {
		if ol[i] != nl[i] {
			changed = append(changed, i+1)
		}
	}
	if len(ol) != len(nl) || fmt.Sprint(changed) != "[102 1402]" {
		t.Fatalf("src/big.go: want lines 102 and 1402 changed, got %v (%d → %d lines)", changed, len(ol), len(nl))
	}
	if tf, _ := os.ReadFile(filepath.Join(ws, "src/big_test.go")); !strings.Contains(string(tf), "V0100() != 1000") || strings.Contains(string(tf), "// more") {
		t.Fatalf("src/big_test.go merged wrong:\n%s", tf)
	}
	hostGoTest(t, ws)
	// The ranged reads reached the model as numbered lines of the range.
	recs, err := k.Audit.Query(context.Background(), audit.Filter{Types: []audit.EventType{audit.EventToolResult}})
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, r := range recs {
		if r.Metadata[router.MetaCallID] == "r2" && !strings.Contains(r.Metadata[router.MetaNormalized], `"functions.fs_read" is fs.read`) {
			t.Errorf("the mangled tool name was not taken as fs.read, audited: %q (%s)", r.Metadata[router.MetaNormalized], r.ToolName)
		}
		if r.ToolName == "fs.read" && r.Metadata["ok"] == "true" {
			reads++
			// The summary is the output's JSON text: a tab is `\t` there.
			want := map[string]string{"r1": `"content":"     1\tpackage big\n     2\t\n     3\tfunc V0001() int { return 1 }`,
				"r2": `"content":"  1390\tfunc V1388() int { return 1388 }\n`}[r.Metadata[router.MetaCallID]]
			if want == "" || !strings.Contains(r.OutputSummary, want) {
				t.Errorf("fs.read %s: output is not numbered from its offset: %.300s", r.Metadata[router.MetaCallID], r.OutputSummary)
			}
		}
	}
	if reads != 2 {
		t.Fatalf("%d successful fs.read results audited, want 2", reads)
	}
}

// TestApplyPatchOverThreeFiles: a unified diff adds the failing test, then
// one *** Begin Patch envelope changes two files and moves a third, all
// judged per path; a patch that touches source while tests are being
// written is refused by the workflow gate before it runs.
func TestApplyPatchOverThreeFiles(t *testing.T) {
	src := editProject(t, map[string]string{
		"go.mod":           "module example.com/calc\n\ngo 1.22\n",
		"src/calc.go":      "package calc\n\n// Add adds.\nfunc Add(a, b int) int {\n\treturn a - b\n}\n",
		"src/strs.go":      "package calc\n\nimport \"strings\"\n\n// Upper upper-cases s.\nfunc Upper(s string) string {\n\treturn strings.ToLower(s)\n}\n",
		"src/helpers.go":   "package calc\n\n// Twice doubles x.\nfunc Twice(x int) int {\n\treturn x * 3\n}\n",
		"src/calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestBuilds(t *testing.T) {}\n",
	})
	addTest := "--- /dev/null\n+++ b/src/fix_test.go\n@@ -0,0 +1,15 @@\n+package calc\n+\n+import \"testing\"\n+\n+func TestFixed(t *testing.T) {\n+\tif Add(2, 3) != 5 {\n+\t\tt.Error(\"Add\")\n+\t}\n+\tif Upper(\"a\") != \"A\" {\n+\t\tt.Error(\"Upper\")\n+\t}\n+\tif Twice(2) != 4 {\n+\t\tt.Error(\"Twice\")\n+\t}\n+}\n"
	early := "*** Begin Patch\n*** Update File: src/calc.go\n@@\n-\treturn a - b\n+\treturn a + b\n*** Add File: src/early_test.go\n+package calc\n*** End Patch\n"
	fix := `*** Begin Patch
*** Update File: src/calc.go
@@ func Add(a, b int) int {
-	return a - b
+	return a + b
*** Update File: src/strs.go
@@
 func Upper(s string) string {
-	return strings.ToLower(s)
+	return strings.ToUpper(s)
 }
*** Update File: src/helpers.go
*** Move to: src/util.go
@@
-	return x * 3
+	return x * 2
*** End Patch
`
	k, ev, done, ws := runScripted(t, src, [][]scriptedCall{
		{{"p1", "plan.complete", map[string]any{"plan": "1. src/fix_test.go: Add, Upper and Twice (fail). 2. Fix them in one patch, moving Twice to util.go. 3. Red, then green."}}},
		{{"a0", "fs.apply_patch", map[string]any{"patch": early}}},
		{{"a1", "fs.apply_patch", map[string]any{"patch": addTest}}, {"t1", "test.run", map[string]any{}}},
		// The edit changes the file the patch just moved into place: it
		// exists only in the session's changeset.
		{{"a2", "fs.apply_patch", map[string]any{"patch": fix}}, {"e1", "fs.edit", map[string]any{"path": "src/util.go", "old_string": "// Twice doubles x.", "new_string": "// Twice returns 2x."}}, {"t2", "test.run", map[string]any{}}},
	})
	tl := strings.Join(ev.tools(), " ")
	if !strings.Contains(tl, "fs.apply_patch!TOOL_UNAVAILABLE") || !strings.Contains(tl, "test.run=red") || !strings.Contains(tl, "test.run=green") {
		t.Fatalf("tool results %s: want the early source patch refused, then red, then green", tl)
	}
	for p, want := range map[string]string{"src/calc.go": "return a + b", "src/strs.go": "strings.ToUpper(s)", "src/util.go": "// Twice returns 2x.\nfunc Twice(x int) int {\n\treturn x * 2", "src/fix_test.go": "func TestFixed"} {
		if b, err := os.ReadFile(filepath.Join(ws, p)); err != nil || !strings.Contains(string(b), want) {
			t.Fatalf("%s was not merged: %v\n%s", p, err, b)
		}
	}
	for _, p := range []string{"src/helpers.go", "src/early_test.go"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err == nil {
			t.Fatalf("%s is in the project", p)
		}
	}
	if done.Commit == "" {
		t.Fatal("no commit")
	}
	hostGoTest(t, ws)
	// Every path of the three-file patch was judged by the policy before
	// the call ran, the move's source and destination included.
	recs, err := k.Audit.Query(context.Background(), audit.Filter{Types: []audit.EventType{audit.EventSyscall}})
	if err != nil {
		t.Fatal(err)
	}
	judged := map[string]bool{}
	for _, r := range recs {
		if r.Metadata[router.MetaCallID] == "a2" && r.Metadata[router.MetaArg] == "patch" {
			judged[r.Metadata[audit.MetaPath]] = true
		}
	}
	for _, p := range []string{"src/calc.go", "src/strs.go", "src/helpers.go", "src/util.go"} {
		if !judged[p] {
			t.Errorf("the policy did not judge %s of the patch (judged %v)", p, judged)
		}
	}
}
