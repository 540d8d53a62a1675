package router

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// A plugin's word about what it changed is judged whoever called it: with
// no changeset to take the changes (`fluffy plugin call`), a path outside
// the project, in .git/ or .fluffy/, or one the policy denies refuses the
// call, every judged path is audited, and nothing is listed as proposed.
func TestReportedChangesAreJudgedWithoutAChangeset(t *testing.T) {
	for _, c := range []struct {
		path    string
		delete  bool
		refused bool
	}{
		{"../outside.txt", false, true},
		{"/etc/passwd", false, true},
		{".git/hooks/pre-commit", false, true},
		{".fluffy/db/MANIFEST", false, true},
		{"secret/key.pem", false, true}, // the demo policy allows writes under src/ and docs/ only
		{"secret/old.pem", true, true},  // a deletion is judged as a write
		{"src/old.go", true, false},
		{"src/a.go", false, false},
		{"docs/x.md", false, false}, // review is the changeset's business
	} {
		f := newFixture(t)
		f.respond = func(call tool.Call) (tool.Result, error) {
			return tool.Result{OK: true, Output: json.RawMessage(`{}`), Changes: []tool.FileChange{{Path: c.path, Mode: "full", Artifact: "a", Delete: c.delete}}}, nil
		}
		res := f.call(&Session{}, "demo.run", `{}`)
		if c.refused != (res.Err != nil) {
			t.Fatalf("%s (delete %v): refused %v, want %v: %+v", c.path, c.delete, res.Err != nil, c.refused, res.Err)
		}
		if !c.refused {
			if len(res.Changes) != 1 {
				t.Fatalf("%s: changes %+v", c.path, res.Changes)
			}
			continue
		}
		if res.Err.Code != CodeChangeRefused || len(res.Changes) != 0 || res.Stage != StageOutput || !strings.Contains(res.Err.What, "proposed changes the kernel refuses") {
			t.Fatalf("%s: %+v stage %s changes %v", c.path, res.Err, res.Stage, res.Changes)
		}
		var kinds []string
		for _, r := range f.records(t, res.CallID) {
			kinds = append(kinds, string(r.EventType))
		}
		if last := kinds[len(kinds)-1]; last != string(audit.EventToolResult) {
			t.Fatalf("%s: audit records %v end without the refused result", c.path, kinds)
		}
	}
}
