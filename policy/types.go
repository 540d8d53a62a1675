package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/policy/token"
)

// Action is a rule's verdict and, for Allow, Deny and RequireReview, the
// engine's final decision.
type Action uint8

const (
	Pass Action = iota // abstain
	Allow
	Deny
	RequireReview
)

var actionNames = [...]string{Pass: "pass", Allow: "allow", Deny: "deny", RequireReview: "require_review"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", a)
}

// Valid reports whether a is one of the four actions.
func (a Action) Valid() bool { return int(a) < len(actionNames) }

// ParseAction parses the YAML spelling of an action.
func ParseAction(s string) (Action, bool) {
	for i, n := range actionNames {
		if n == s {
			return Action(i), true
		}
	}
	return Pass, false
}

// Layer is where a rule lives.
type Layer uint8

const (
	LayerBuiltin Layer = iota
	LayerToken
	LayerYAML
	LayerExtension
	LayerDefault // the default-deny when nothing allowed
)

func (l Layer) String() string {
	return [...]string{"builtin", "token", "yaml", "extension", "default"}[l]
}

// Caller is who makes the request.
type Caller struct {
	Kind       string   // "user", "kernel" or "plugin"
	Plugin     string   // plugin name, for Kind "plugin"
	PluginKind string   // tool, provider, runtime, vcs, policy
	Instance   string   // plugin instance id
	Tags       []string // capability tags: core_plugin, trusted_write, third_party, ...
	Hosts      []string // network hosts the plugin's manifest declares
}

// Peer is the OS-level identity behind the connection (SO_PEERCRED).
type Peer struct {
	PID         int
	ContainerID string
}

// Request is one syscall to judge.
type Request struct {
	Syscall  string        // e.g. fs.read, fs.write, net.connect, shell.exec, test.run, plugin.install, policy.update
	Path     string        // project-relative, slash-separated; trailing "/" marks a directory
	Host     string        // for network syscalls
	Size     int64         // bytes written/transferred, when relevant
	Duration time.Duration // requested run time, when relevant
	Sandbox  string        // L2 template the operation runs in ("" = none)

	Caller Caller
	Peer   Peer

	SessionMode string // strict, explore, debug
	State       string // state machine state

	Token *token.Use // capability token presented with the request
	// ForToken marks the evaluation of a capability-token issuance for
	// this request's scope (rules with require_capability_token allow it).
	ForToken bool
}

// String is a compact one-line rendering for logs and the CLI.
func (r Request) String() string {
	var b strings.Builder
	b.WriteString(r.Syscall)
	kv := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	kv("path", r.Path)
	kv("host", r.Host)
	if r.Size > 0 {
		kv("size", fmt.Sprint(r.Size))
	}
	kv("sandbox", r.Sandbox)
	switch {
	case r.Caller.Plugin != "":
		kv("caller", r.Caller.Plugin)
	case r.Caller.Kind != "":
		kv("caller", r.Caller.Kind)
	}
	if len(r.Caller.Tags) > 0 {
		kv("tags", strings.Join(r.Caller.Tags, ","))
	}
	kv("mode", r.SessionMode)
	kv("state", r.State)
	return b.String()
}

// RuleEval is one rule's part in a decision.
type RuleEval struct {
	Rule    string
	Layer   Layer
	Source  string // file:line for YAML rules
	Matched bool   // the rule applied (match and no except)
	Action  Action // its verdict (Pass when it did not apply)
	Reason  string
	Note    string // e.g. "except matched", "constraint max_file_size violated"
}

// Result is the engine's answer.
type Result struct {
	// Decision is what the rules decided: Allow, Deny or RequireReview.
	Decision Action
	// Enforced is what the caller must do. It equals Decision except in
	// observe mode, where a deny from the YAML, extension or default layer
	// is recorded (WouldDeny) but not enforced.
	Enforced  Action
	WouldDeny bool
	// ByToken is set when a capability token decided (audit: allowed_by_token).
	ByToken bool
	// TokenStatus explains a presented token that was not used.
	TokenStatus string
	// Reasons are the deny reason, or every review reason, or the allows'.
	Reasons []string
	// Deciding are the rules behind Decision.
	Deciding []RuleEval
	// Trace holds every rule evaluated; only filled by Explain.
	Trace []RuleEval
	// At is the time snapshot the whole evaluation used.
	At time.Time
}

// DecidingRule is the first deciding rule's name, for audit records.
func (r Result) DecidingRule() string {
	if len(r.Deciding) == 0 {
		return ""
	}
	return r.Deciding[0].Rule
}
