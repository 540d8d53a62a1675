package main

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

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/policy"
)

// alwaysCassette is a model that writes docs/notes.md twice, then
// docs/other.md, then stops: every docs write is one the default policy
// sends to review.
func alwaysCassette(t *testing.T) string {
	t.Helper()
	call := func(turn int, id, name string, a map[string]string) string {
		args, _ := json.Marshal(a)
		delta, _ := json.Marshal(string(args))
		return fmt.Sprintf(`{"turn":%d,"events":[{"text_delta":"Calling %s. "},{"tool_call_start":{"call_id":%q,"name":%q}},{"tool_call_delta":{"call_id":%q,"arguments_delta":%s}},{"tool_call_end":{"call_id":%q,"name":%q,"arguments":%s}},{"usage":{"input_tokens":900,"output_tokens":30}},{"done":{"stop_reason":"tool_use","model":"replay"}}]}`,
			turn, name, id, name, id, delta, id, name, args)
	}
	write := func(turn int, id, path string) string {
		return call(turn, id, "fs.write", map[string]string{"path": path, "content": fmt.Sprintf("turn %d\n", turn)})
	}
	lines := []string{
		call(1, "c0", "plan.complete", map[string]string{"plan": "write docs/notes.md, then docs/other.md"}),
		write(2, "c1", "docs/notes.md"),
		write(3, "c2", "docs/notes.md"),
		write(4, "c3", "docs/other.md"),
		`{"turn":5,"events":[{"text_delta":"Notes written. "},{"usage":{"input_tokens":1000,"output_tokens":10}},{"done":{"stop_reason":"end_turn","model":"replay"}}]}`,
	}
	p := filepath.Join(t.TempDir(), "always.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// reviewProject is a fluffy layout, a fresh home and the demo project
// whose replayed model writes docs (alwaysCassette), its kernel stopped
// when the test ends.
func reviewProject(t *testing.T) (fluffy, home, ws string) {
	t.Helper()
	needDockerCLI(t)
	fluffy = fluffyLayout(t, "provider-replay", "vcs-git")
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ws = demoProject(t, fluffy, home, alwaysCassette(t))
	t.Cleanup(func() {
		stop := exec.Command(fluffy, "kernel", "stop")
		stop.Dir, stop.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
		_ = stop.Run()
	})
	return fluffy, home, ws
}

// TestREPLApproveAlwaysProposesThePolicyRule is "don't ask again" as a
// person uses it, through the daemon's review.respond: the tool review
// offers always and shows the rule it adds; /approve always brings the
// policy.update review with the lines it writes and its trial; /approve
// writes .fluffy/policy.yaml (the default policy plus exactly that), the
// same write is not asked again, a write of another path is.
func TestREPLApproveAlwaysProposesThePolicyRule(t *testing.T) {
	fluffy, home, ws := reviewProject(t)
	var err error
	file := policy.ProjectPath(ws)
	if _, err := os.Stat(file); err == nil {
		t.Fatalf("precondition: %s exists", file)
	}
	adapter := filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker")
	s := newTmux(t, ws, []string{"FLUFFY_HOME=" + home, "FLUFFY_RUNTIME_ADAPTER=" + adapter, "NO_COLOR=1"}, fluffy, "--l1", "none")
	s.wait(2*time.Minute, "the prompt", func(sc string) bool { return strings.Contains(sc, "[strict] [idle] >") })
	s.send("/explore", "Enter")
	s.wait(time.Minute, "explore mode", func(sc string) bool { return strings.Contains(sc, "[explore] [idle] >") })
	s.send("write the notes", "Enter")
	const item = `- {syscall: fs.write, path_glob: ["/docs/notes.md"], plugin: tool-fs}`
	sc := s.wait(4*time.Minute, "the tool review", func(sc string) bool { return strings.Contains(sc, "review> ") })
	for _, want := range []string{"Review (tool)", "docs/notes.md", "/approve always proposes this change to " + file, "rule docs-and-config-review", item, "/approve [once|session|always]"} {
		if !strings.Contains(sc, want) {
			t.Fatalf("the tool review does not show %q:\n%s", want, sc)
		}
	}
	s.send("/approve always", "Enter")
	sc = s.wait(time.Minute, "the policy.update review", func(sc string) bool {
		return strings.Contains(sc, "Review (policy.update)") && strings.Count(sc, "review> ") >= 2
	})
	for _, want := range []string{"Proposed change to " + file, "+      " + item, "Trial: replayed", "/approve to write it to"} {
		if !strings.Contains(sc, want) {
			t.Fatalf("the policy.update review does not show %q:\n%s", want, sc)
		}
	}
	// The default policy already allows the write (write-tests-and-source):
	// the except item is all it takes, no allow rule is added.
	if strings.Contains(sc, "name: always-") {
		t.Fatalf("the policy.update review adds an allow rule the default policy does not need:\n%s", sc)
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatalf("the policy file was written before the policy.update was approved")
	}
	// The policy.update review is answered once: "always" is asked again.
	s.send("/approve always", "Enter")
	s.wait(time.Minute, "the scope refused", func(sc string) bool { return strings.Contains(sc, `"always" is not offered for this review`) })
	s.send("/approve", "Enter")
	sc = s.wait(4*time.Minute, "the review of docs/other.md", func(sc string) bool {
		i := strings.LastIndex(sc, "Review (tool)")
		return i >= 0 && strings.Contains(sc[i:], "docs/other.md") && strings.Contains(sc[i:], "review> ")
	})
	if n := strings.Count(sc, "Review (tool)"); n != 2 {
		t.Fatalf("want 2 tool reviews (notes.md once, other.md), the screen shows %d:\n%s", n, sc)
	}
	if !strings.Contains(sc, "policy updated: "+file) {
		t.Fatalf("no notice of the policy update:\n%s", sc)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the approved policy update was not written: %v", err)
	}
	if !linesIn(string(policy.DefaultYAML()), string(data)) || !strings.Contains(string(data), "      "+item) {
		t.Fatalf("%s is not the default policy plus the except item:\n%s", file, data)
	}
	s.send("/approve", "Enter")
	s.wait(4*time.Minute, "the task to end or ask for the merge", func(sc string) bool {
		return strings.Contains(sc, "Review (merge)") || strings.Contains(sc, "Done.") || strings.Contains(sc, "Stopped:") || strings.Contains(sc, "Failed:")
	})
	s.send("C-c")
	s.send("C-c")
	s.send("C-d")
	s.wait(time.Minute, "fluffy to exit", func(sc string) bool { return strings.Contains(sc, "FLUFFY-EXITED-") })
	stop := exec.Command(fluffy, "kernel", "stop")
	stop.Dir, stop.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
	_ = stop.Run()
	// The audit log holds the change with both hashes.
	// (The stopped kernel releases the database as it exits.)
	var log *audit.Log
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
		if log, err = audit.Open(context.Background(), audit.Options{Dir: store.DefaultDir(ws)}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	defer log.Close()
	recs, err := log.Recent(context.Background(), 5, audit.EventPolicyUpdate)
	if err != nil || len(recs) != 1 || recs[0].Metadata["new_hash"] == "" || recs[0].Metadata["old_hash"] == "" {
		t.Fatalf("policy_update records = %+v (%v), want one with both hashes", recs, err)
	}
}

// linesIn reports whether every line of old appears in new, in order.
func linesIn(old, new string) bool {
	nl := strings.Split(new, "\n")
	i := 0
	for _, l := range strings.Split(old, "\n") {
		for i < len(nl) && nl[i] != l {
			i++
		}
		if i == len(nl) {
			return false
		}
		i++
	}
	return true
}
