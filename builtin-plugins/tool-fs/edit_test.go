package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk/plugintest"
)

func TestManifestMatchesToolSet(t *testing.T) {
	plugintest.CheckManifest(t, newToolSet(hclog.NewNullLogger()), "plugin.yaml")
}

// TestEveryBuiltinParameterIsDescribed: the model acts on a parameter's
// description, so every builtin tool's every parameter has one.
func TestEveryBuiltinParameterIsDescribed(t *testing.T) {
	files, _ := filepath.Glob("../tool-*/plugin.yaml")
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tools []struct {
				Name       string         `yaml:"name"`
				Parameters map[string]any `yaml:"parameters"`
			} `yaml:"tools"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tl := range doc.Tools {
			var walk func(at string, schema map[string]any)
			walk = func(at string, schema map[string]any) {
				props, _ := schema["properties"].(map[string]any)
				for name, p := range props {
					pm, _ := p.(map[string]any)
					if d, _ := pm["description"].(string); len(strings.TrimSpace(d)) < 10 {
						t.Errorf("%s %s: parameter %s%s has no usable description", f, tl.Name, at, name)
					}
					if items, ok := pm["items"].(map[string]any); ok {
						walk(at+name+"[].", items)
					}
				}
			}
			walk("", tl.Parameters)
		}
	}
}

func numbered(from, to int, line func(int) string) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%6d\t%s\n", i, line(i))
	}
	return b.String()
}

func TestReadLines(t *testing.T) {
	var big strings.Builder
	for i := 1; i <= 1500; i++ {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	long := strings.Repeat("x", 2500)
	env := plugintest.NewEnv(t, map[string]string{
		"big.txt":   big.String(),
		"noeol.txt": "a\nb",
		"empty.txt": "",
		"long.txt":  "short\n" + long + "\n",
		"crlf.txt":  "one\r\ntwo\r\n",
		"bin.dat":   "ELF\x00\x01\x02",
		"latin.txt": strings.Repeat("caf\xe9 na\xefve ", 100),
		"utf8.txt":  "héllo wörld ✓\n",
	})
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	line := func(i int) string { return fmt.Sprintf("line %d", i) }
	cases := []struct {
		name, args string
		code       string
		content    string
		total, end int
		more       bool
		next       int
	}{
		{"default-all", `{"path":"big.txt"}`, "", numbered(1, 1500, line), 1500, 1500, false, 0},
		{"range", `{"path":"big.txt","offset":100,"limit":3}`, "", numbered(100, 102, line), 1500, 102, true, 103},
		{"last-lines", `{"path":"big.txt","offset":1499,"limit":10}`, "", numbered(1499, 1500, line), 1500, 1500, false, 0},
		{"offset-zero-is-first", `{"path":"big.txt","offset":0,"limit":1}`, "", numbered(1, 1, line), 1500, 1, true, 2},
		{"past-end", `{"path":"big.txt","offset":1502}`, "FS_RANGE", "", 0, 0, false, 0},
		{"no-eol", `{"path":"noeol.txt"}`, "", "     1\ta\n     2\tb\n", 2, 2, false, 0},
		{"empty", `{"path":"empty.txt"}`, "", "", 0, 0, false, 0},
		{"crlf", `{"path":"crlf.txt"}`, "", "     1\tone\n     2\ttwo\n", 2, 2, false, 0},
		{"long-clipped", `{"path":"long.txt"}`, "", "     1\tshort\n     2\t" + strings.Repeat("x", 2000) + "… [line clipped: 2000 of 2500 bytes shown]\n", 2, 2, false, 0},
		{"binary-nul", `{"path":"bin.dat"}`, "FS_BINARY", "", 0, 0, false, 0},
		{"binary-latin1", `{"path":"latin.txt"}`, "FS_BINARY", "", 0, 0, false, 0},
		{"utf8-ok", `{"path":"utf8.txt"}`, "", "     1\théllo wörld ✓\n", 1, 1, false, 0},
		{"negative", `{"path":"big.txt","offset":-1}`, "TOOL_ARGS_INVALID", "", 0, 0, false, 0},
	}
	whole := sum([]byte(big.String()))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, c, "fs.read", tc.args)
			if tc.code != "" {
				if r.OK || r.Err == nil || r.Err.Code != tc.code {
					t.Fatalf("want %s, got ok=%v %v", tc.code, r.OK, r.Err)
				}
				return
			}
			if !r.OK {
				t.Fatalf("error %v", r.Err)
			}
			var rr readResult
			if err := json.Unmarshal(r.Output, &rr); err != nil {
				t.Fatal(err)
			}
			if rr.Content != tc.content || rr.TotalLines != tc.total || rr.EndLine != tc.end || rr.More != tc.more || rr.NextOffset != tc.next {
				t.Fatalf("got content %.200q total %d end %d more %v next %d", rr.Content, rr.TotalLines, rr.EndLine, rr.More, rr.NextOffset)
			}
			// A line range carries the whole file's hash: what an edit's
			// expected_sha256 (and STALE_FILE) compare against.
			if strings.HasPrefix(tc.args, `{"path":"big.txt"`) && rr.SHA256 != whole {
				t.Fatalf("sha256 %s is not the whole file's %s", rr.SHA256, whole)
			}
		})
	}
}

// editCall runs fs.edit and, on success, applies its patch to the file's
// content to give what the kernel would take into the changeset.
func editResult(t *testing.T, env plugintest.Env, r tool.Result, path string) string {
	t.Helper()
	if !r.OK {
		t.Fatalf("error %v", r.Err)
	}
	if len(r.Changes) != 1 || r.Changes[0].Path != path {
		t.Fatalf("changes %+v", r.Changes)
	}
	old, _ := os.ReadFile(filepath.Join(env.Workspace, path))
	d, err := os.ReadFile(filepath.Join(env.OutDir, r.Changes[0].Artifact))
	if err != nil {
		t.Fatal(err)
	}
	got, err := patch.Apply(old, string(d))
	if err != nil {
		t.Fatalf("artifact does not apply: %v", err)
	}
	if sum(got) != r.Changes[0].SHA256After {
		t.Fatal("declared sha256_after is not the artifact's result")
	}
	return string(got)
}

func TestEdit(t *testing.T) {
	src := "package a\n\nfunc A() int {\n\treturn 1\n}\n\nfunc B() int {\n\treturn 1\n}\n\nfunc C() {}   \n"
	env := plugintest.NewEnv(t, map[string]string{"a.go": src, "bin.dat": "\x00\x01", "w.txt": "one\r\ntwo\r\nthree\r\n"})
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	cases := []struct {
		name string
		args any
		code string
		// want is the new content; whyHas/fixHas must appear in the
		// error so that the next turn can succeed.
		want            string
		whatHas, fixHas []string
	}{
		{name: "unique", args: map[string]any{"path": "a.go", "old_string": "func A() int {\n\treturn 1", "new_string": "func A() int {\n\treturn 2"},
			want: strings.Replace(src, "return 1", "return 2", 1)},
		{name: "ambiguous", args: map[string]any{"path": "a.go", "old_string": "\treturn 1\n", "new_string": "\treturn 3\n"},
			code: CodeEditAmbiguous, whatHas: []string{"2 times", "lines 4, 8"}, fixHas: []string{"replace_all"}},
		{name: "replace-all", args: map[string]any{"path": "a.go", "old_string": "\treturn 1\n", "new_string": "\treturn 3\n", "replace_all": true},
			want: strings.ReplaceAll(src, "return 1", "return 3")},
		{name: "absent-shows-closest", args: map[string]any{"path": "a.go", "old_string": "func Bee() int {", "new_string": "x"},
			code: CodeEditNotFound, fixHas: []string{"closest line is 7", `line 7: "func B() int {"`}},
		{name: "indentation-differs-refused", args: map[string]any{"path": "a.go", "old_string": "func A() int {\n    return 1\n}", "new_string": "x"},
			code: CodeEditNotFound, whatHas: []string{"not in a.go"}, fixHas: []string{"own indentation", `line 4: "\treturn 1"`}},
		{name: "line-number-prefixes", args: map[string]any{"path": "a.go", "old_string": "     3\tfunc A() int {", "new_string": "x"},
			code: CodeEditNotFound, fixHas: []string{"line-number prefixes"}},
		{name: "trailing-whitespace-normalised", args: map[string]any{"path": "a.go", "old_string": "func C() {}\n", "new_string": "func C() { println() }\n"},
			want: strings.Replace(src, "func C() {}   \n", "func C() { println() }\n", 1)},
		{name: "edits-atomic", args: map[string]any{"path": "a.go", "edits": []map[string]any{
			{"old_string": "func A() int {\n\treturn 1", "new_string": "func A() int {\n\treturn 10"},
			{"old_string": "func B() int {\n\treturn 1", "new_string": "func B() int {\n\treturn 20"}}},
			want: strings.Replace(strings.Replace(src, "return 1", "return 10", 1), "\treturn 1\n}\n\nfunc C", "\treturn 20\n}\n\nfunc C", 1)},
		{name: "edits-one-fails-none-applied", args: map[string]any{"path": "a.go", "edits": []map[string]any{
			{"old_string": "func A() int {", "new_string": "func A2() int {"},
			{"old_string": "nowhere", "new_string": "x"}}},
			code: CodeEditNotFound, whatHas: []string{"edits[1]"}},
		{name: "crlf-file-lf-edit", args: map[string]any{"path": "w.txt", "old_string": "one\ntwo\n", "new_string": "one\n2\n"},
			want: "one\r\n2\r\nthree\r\n"},
		{name: "noop", args: map[string]any{"path": "a.go", "old_string": "func A", "new_string": "func A"}, code: CodeEditNoop},
		{name: "missing-file", args: map[string]any{"path": "b.go", "old_string": "x", "new_string": "y"}, code: "FS_NOT_FOUND", fixHas: []string{"fs.write"}},
		{name: "empty-old", args: map[string]any{"path": "a.go", "old_string": "", "new_string": "y"}, code: "TOOL_ARGS_INVALID"},
		{name: "both-forms", args: map[string]any{"path": "a.go", "old_string": "a", "new_string": "b", "edits": []map[string]any{{"old_string": "a", "new_string": "b"}}}, code: "TOOL_ARGS_INVALID"},
		{name: "stale", args: map[string]any{"path": "a.go", "old_string": "func A", "new_string": "func Z", "expected_sha256": "0123"}, code: "STALE_FILE"},
		{name: "binary", args: map[string]any{"path": "bin.dat", "old_string": "\x00", "new_string": "y"}, code: "FS_BINARY"},
		{name: "reserved", args: map[string]any{"path": ".git/config", "old_string": "a", "new_string": "b"}, code: "FS_PATH_RESERVED"},
		{name: "escape", args: map[string]any{"path": "../x", "old_string": "a", "new_string": "b"}, code: "FS_PATH_ESCAPES"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, c, "fs.edit", js(tc.args))
			if tc.code != "" {
				if r.OK || r.Err == nil || r.Err.Code != tc.code {
					t.Fatalf("want %s, got ok=%v %v", tc.code, r.OK, r.Err)
				}
				if len(r.Changes) != 0 {
					t.Fatalf("a refused edit proposed %+v", r.Changes)
				}
				for _, s := range tc.whatHas {
					if !strings.Contains(r.Err.What+" "+r.Err.Why, s) {
						t.Errorf("error %q / %q lacks %q", r.Err.What, r.Err.Why, s)
					}
				}
				for _, s := range tc.fixHas {
					if !strings.Contains(r.Err.Fix, s) {
						t.Errorf("fix %q lacks %q", r.Err.Fix, s)
					}
				}
				return
			}
			var a struct{ Path string }
			_ = json.Unmarshal([]byte(js(tc.args)), &a)
			if got := editResult(t, env, r, a.Path); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			if tc.name == "trailing-whitespace-normalised" && !strings.Contains(string(r.Output), "trailing whitespace") {
				t.Fatalf("the normalisation is not reported: %s", r.Output)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(env.Workspace, "a.go")); string(b) != src {
		t.Fatal("fs.edit wrote the project")
	}
}

func TestApplyPatch(t *testing.T) {
	files := map[string]string{
		"a.go":      "package a\n\nfunc A() int {\n\treturn 1\n}\n",
		"b.go":      "package a\n\nfunc B() int {\n\treturn 2\n}\n",
		"old.go":    "package a\n\n// Old is moved.\nfunc Old() {}\n",
		"gone.go":   "package a\n",
		"noeol.txt": "x\ny",
		"dup.txt":   "a\nb\na\n",
	}
	env := plugintest.NewEnv(t, files)
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	envelope := `*** Begin Patch
*** Update File: a.go
@@ func A() int {
-	return 1
+	return 10
*** Update File: b.go
@@
 func B() int {
-	return 2
+	return 20
 }
*** Add File: c.go
+package a
+
+func C() {}
*** Delete File: gone.go
*** Update File: old.go
*** Move to: new.go
@@
-// Old is moved.
-func Old() {}
+// New was Old.
+func New() {}
*** End Patch`
	unified := `diff --git a/a.go b/a.go
index 1111111..2222222 100644
--- a/a.go
+++ b/a.go
@@ -3,3 +3,3 @@ package a
 func A() int {
-	return 1
+	return 100
 }
--- a/noeol.txt
+++ b/noeol.txt
@@ -1,2 +1,2 @@
 x
-y
\ No newline at end of file
+z
--- /dev/null
+++ b/d.go
@@ -0,0 +1,1 @@
+package a
`
	type want struct {
		path, content string
		deleted       bool
	}
	cases := []struct {
		name, patch string
		code        string
		whyHas      string
		want        []want
	}{
		{"envelope-five-files", envelope, "", "", []want{
			{"a.go", "package a\n\nfunc A() int {\n\treturn 10\n}\n", false},
			{"b.go", "package a\n\nfunc B() int {\n\treturn 20\n}\n", false},
			{"c.go", "package a\n\nfunc C() {}\n", false},
			{"gone.go", "", true},
			{"old.go", "", true},
			{"new.go", "package a\n\n// New was Old.\nfunc New() {}\n", false},
		}},
		{"unified-three-files", unified, "", "", []want{
			{"a.go", "package a\n\nfunc A() int {\n\treturn 100\n}\n", false},
			{"noeol.txt", "x\nz\n", false},
			{"d.go", "package a\n", false},
		}},
		{"unified-wrong-line-numbers", "--- a/b.go\n+++ b/b.go\n@@ -40,3 +40,3 @@\n func B() int {\n-\treturn 2\n+\treturn 3\n }\n", "", "", []want{
			{"b.go", "package a\n\nfunc B() int {\n\treturn 3\n}\n", false}}},
		{"context-mismatch-none-applied", "*** Begin Patch\n*** Update File: a.go\n@@\n-\treturn 1\n+\treturn 9\n*** Update File: b.go\n@@\n-\treturn 99\n+\treturn 9\n*** End Patch\n",
			CodePatchConflict, "closest line is 4", nil},
		{"ambiguous-hunk-refused", "*** Begin Patch\n*** Update File: dup.txt\n@@\n-a\n+c\n*** End Patch\n", CodePatchConflict, "fits at line 1 and at line 3", nil},
		{"add-existing", "*** Begin Patch\n*** Add File: a.go\n+x\n*** End Patch", CodePatchConflict, "", nil},
		{"update-missing", "*** Begin Patch\n*** Update File: zz.go\n@@\n-a\n+b\n*** End Patch", CodePatchConflict, "", nil},
		{"no-end", "*** Begin Patch\n*** Update File: a.go\n@@\n-\treturn 1\n+\treturn 2\n", CodePatchInvalid, "End Patch", nil},
		{"prose", "please change a.go", CodePatchInvalid, "", nil},
		{"escape", "*** Begin Patch\n*** Add File: ../x.go\n+x\n*** End Patch", "FS_PATH_ESCAPES", "", nil},
		{"move-onto-existing", "*** Begin Patch\n*** Update File: a.go\n*** Move to: b.go\n*** End Patch", CodePatchConflict, "", nil},
		{"same-file-twice", "*** Begin Patch\n*** Delete File: a.go\n*** Delete File: a.go\n*** End Patch", CodePatchInvalid, "twice", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"patch": tc.patch})
			r := call(t, c, "fs.apply_patch", string(args))
			if tc.code != "" {
				if r.OK || r.Err == nil || r.Err.Code != tc.code {
					t.Fatalf("want %s, got ok=%v %v", tc.code, r.OK, r.Err)
				}
				if len(r.Changes) != 0 {
					t.Fatalf("a refused patch proposed %+v", r.Changes)
				}
				if !strings.Contains(r.Err.Why+r.Err.Fix, tc.whyHas) {
					t.Fatalf("error %+v lacks %q", r.Err, tc.whyHas)
				}
				return
			}
			if !r.OK {
				t.Fatalf("error %v", r.Err)
			}
			if len(r.Changes) != len(tc.want) {
				t.Fatalf("changes %+v", r.Changes)
			}
			for i, w := range tc.want {
				ch := r.Changes[i]
				if ch.Path != w.path || ch.Delete != w.deleted {
					t.Fatalf("change %d: %+v, want %+v", i, ch, w)
				}
				if w.deleted {
					continue
				}
				old, _ := os.ReadFile(filepath.Join(env.Workspace, w.path))
				d, _ := os.ReadFile(filepath.Join(env.OutDir, ch.Artifact))
				got, err := patch.Apply(old, string(d))
				if err != nil || string(got) != w.content {
					t.Fatalf("%s: %v\n%q\nwant %q", w.path, err, got, w.content)
				}
			}
		})
	}
	for p, s := range files {
		if b, _ := os.ReadFile(filepath.Join(env.Workspace, p)); string(b) != s {
			t.Fatalf("fs.apply_patch wrote the project's %s", p)
		}
	}
}

// TestBytesToChangeOneLine measures what the model sends to change one
// line of a 2 000-line file: the whole file through fs.write, against
// old_string/new_string through fs.edit.
func TestBytesToChangeOneLine(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&b, "\tfield%04d := compute(%d) // keeps the file realistic\n", i, i)
	}
	src := b.String()
	env := plugintest.NewEnv(t, map[string]string{"big.go": src})
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	newSrc := strings.Replace(src, "compute(1234)", "compute(4321)", 1)
	write, _ := json.Marshal(map[string]string{"path": "big.go", "content": newSrc})
	edit, _ := json.Marshal(map[string]string{"path": "big.go", "old_string": "field1234 := compute(1234)", "new_string": "field1234 := compute(4321)"})
	rw := call(t, c, "fs.write", string(write))
	re := call(t, c, "fs.edit", string(edit))
	if !rw.OK || !re.OK {
		t.Fatalf("write %v edit %v", rw.Err, re.Err)
	}
	if got := editResult(t, env, re, "big.go"); got != newSrc {
		t.Fatal("fs.edit did not make the same change as fs.write")
	}
	t.Logf("bytes of arguments to change one line of a 2000-line file (%d bytes): fs.write %d, fs.edit %d (%.0fx fewer)",
		len(src), len(write), len(edit), float64(len(write))/float64(len(edit)))
	if len(edit)*100 > len(write) {
		t.Fatalf("fs.edit sent %d bytes, fs.write %d: want at least 100x fewer", len(edit), len(write))
	}
}

// TestRangeReadHashGuardsEdit: the sha256 of a line-range read is the whole
// file's, so an edit sent with it applies, and the same hash after the file
// changed is STALE_FILE.
func TestRangeReadHashGuardsEdit(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	env := plugintest.NewEnv(t, map[string]string{"f.txt": b.String()})
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	r := call(t, c, "fs.read", `{"path":"f.txt","offset":250,"limit":5}`)
	var rr readResult
	if err := json.Unmarshal(r.Output, &rr); err != nil || rr.SHA256 == "" {
		t.Fatalf("read: %v %s", err, r.Output)
	}
	edit := func() tool.Result {
		args, _ := json.Marshal(map[string]string{"path": "f.txt", "old_string": "line 252\n", "new_string": "line 252!\n", "expected_sha256": rr.SHA256})
		return call(t, c, "fs.edit", string(args))
	}
	if got := editResult(t, env, edit(), "f.txt"); !strings.Contains(got, "line 252!\n") {
		t.Fatalf("edit with a range read's hash: %q", got)
	}
	if err := os.WriteFile(filepath.Join(env.Workspace, "f.txt"), []byte(b.String()+"line 301\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := edit(); r.OK || r.Err == nil || r.Err.Code != "STALE_FILE" {
		t.Fatalf("edit after the file changed: %+v", r.Err)
	}
}
