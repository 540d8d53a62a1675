package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
)

// TestCompletions: what the tree offers after each line typed so far.
func TestCompletions(t *testing.T) {
	for _, tc := range []struct {
		words       []string
		want, never []string
	}{
		{[]string{""}, []string{"plugin", "policy", "help", "completion"}, []string{"stub-kernel", "run"}},
		{[]string{"pol"}, []string{"policy"}, nil},
		{[]string{"plugin", ""}, []string{"install", "call", "stamp"}, nil},
		{[]string{"kernel", ""}, []string{"status", "stop"}, []string{"run"}},
		{[]string{"plugin", "install", "--"}, []string{"--sandbox", "--grant", "--yes", "--help"}, []string{"install"}},
		{[]string{"plugin", "install", "--sandbox", ""}, []string{"docker", "none"}, []string{"--yes"}},
		{[]string{"plugin", "install", "--project", ""}, nil, []string{"install", "--yes"}},
		{[]string{"audit", "export", "-"}, []string{"-o", "--db"}, nil},
		{[]string{"policy", "update", "x.yaml", ""}, nil, []string{"show"}},
		{[]string{"help", ""}, []string{"plugin", "mcp"}, nil},
		{[]string{"help", "mcp", ""}, []string{"add", "tools"}, nil},
		{[]string{"-"}, []string{"--provider", "--max-cost"}, nil},
		{[]string{"--mode", ""}, []string{"strict", "explore", "debug"}, nil},
	} {
		got := completions(docEnv(), commandTree(), tc.words)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: %q not offered: %q", tc.words, w, got)
			}
		}
		for _, w := range tc.never {
			if slices.Contains(got, w) {
				t.Errorf("%q: %q offered: %q", tc.words, w, got)
			}
		}
		if tc.want == nil && len(got) != 0 {
			t.Errorf("%q: want nothing (file names), got %q", tc.words, got)
		}
	}
}

// TestBashCompletionScript: the script `fluffy completion bash` prints,
// loaded into a real bash, completes through the built binary.
func TestBashCompletionScript(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed:", err)
	}
	bin := testbin.Build(t, "cmd/fluffy")
	for _, tc := range []struct {
		line string // the words typed, the last one being completed
		want string // COMPREPLY, sorted and joined by spaces
	}{
		{"pol", "policy"},
		{"policy u", "update"},
		{"plugin install --sand", "--sandbox"},
		{"plugin install --sandbox n", "none"},
		{"help mcp t", "tools trust"},
	} {
		words := strings.Fields(tc.line)
		script := `source <("$FLUFFY" completion bash)
COMP_WORDS=("$FLUFFY" "$@"); COMP_CWORD=$#
_fluffy
printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '`
		cmd := exec.Command(bash, append([]string{"-c", script, "bash"}, words...)...)
		cmd.Env = append(cmd.Environ(), "FLUFFY="+bin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("completing %q: got %q, want %q", tc.line, got, tc.want)
		}
	}
}
