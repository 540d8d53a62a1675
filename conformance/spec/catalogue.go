package spec

import (
	"slices"
)

// SuiteVersion is recorded in every certification. Bump the minor version
// when items are added, the major when an item's meaning changes; an ID is
// never reused for a different requirement.
//
// 2.0.0: a skipped MUST item means "not certified"; CORE-SANDBOX-001
// checks each of its promises on the running container;
// CORE-HANDSHAKE-004 covers declared versions the kernel cannot speak;
// TOOL-PROGRESS-001 cancels every tool and checks the result;
// PROVIDER-PROXY-001 runs.
//
// 2.1.0: each provider probe sends its own prompt (ProbeRequest); for a
// provider whose manifest declares no network (provider-replay), there is
// no upstream request for PROVIDER-CANCEL-001 to see closed and
// PROVIDER-PROXY-001 is n/a, while any connection it opens fails both.
const SuiteVersion = "2.1.0"

// Level is an RFC 2119 requirement level.
type Level string

const (
	MUST   Level = "MUST"
	SHOULD Level = "SHOULD"
)

// Profile names. Core applies to every plugin; the others to one kind each.
const (
	ProfileCore     = "core"
	ProfileTool     = "tool"
	ProfileProvider = "provider"
	ProfileRuntime  = "runtime"
	ProfileVCS      = "vcs"
	ProfilePolicy   = "policy"
)

// Item is one requirement of the suite.
type Item struct {
	ID      string `json:"id"`
	Level   Level  `json:"level"`
	Profile string `json:"profile"`
	// APIVersions the item applies to; empty means every version.
	APIVersions []int  `json:"api_versions,omitempty"`
	Statement   string `json:"statement"`
	// Source is the DESIGN.md or seed section the requirement comes from.
	Source string `json:"source"`
}

// AppliesTo reports whether the item applies to a plugin speaking version v.
func (i Item) AppliesTo(v int) bool {
	return len(i.APIVersions) == 0 || slices.Contains(i.APIVersions, v)
}

// Catalogue returns every item, in the order a run evaluates them (core
// first, then each kind profile). The slice is fresh on every call.
func Catalogue() []Item {
	return []Item{
		// core: every plugin
		{ID: "CORE-MANIFEST-001", Level: MUST, Profile: ProfileCore, Statement: "plugin.yaml parses and validates against the manifest schema", Source: "DESIGN.md Plugins/Manifest"},
		{ID: "CORE-MANIFEST-002", Level: MUST, Profile: ProfileCore, Statement: "the entry binary's sha256 equals the manifest's sha256", Source: "DESIGN.md Plugins/Manifest; seed 000 Plugin Lifecycle"},
		{ID: "CORE-MANIFEST-003", Level: MUST, Profile: ProfileCore, Statement: "api_versions overlaps the kernel's supported range", Source: "seed 000 Version Compatibility"},
		{ID: "CORE-HANDSHAKE-001", Level: MUST, Profile: ProfileCore, Statement: "the plugin completes the go-plugin handshake with fluffy's magic cookie over gRPC", Source: "DESIGN.md Plugins/Protocol"},
		{ID: "CORE-HANDSHAKE-002", Level: SHOULD, Profile: ProfileCore, Statement: "started without the magic cookie, the binary exits non-zero without printing a handshake", Source: "DESIGN.md Plugins/Protocol"},
		{ID: "CORE-HANDSHAKE-003", Level: MUST, Profile: ProfileCore, Statement: "offered the kernel's range, the plugin negotiates a version inside it that its manifest declares", Source: "seed 000 Version Compatibility; DESIGN.md Plugins/Protocol"},
		{ID: "CORE-HANDSHAKE-004", Level: MUST, Profile: ProfileCore, Statement: "every API version the manifest declares is really served when offered alone (one the kernel cannot speak: the binary completes the handshake with it)", Source: "seed 000 Version Compatibility"},
		{ID: "CORE-HANDSHAKE-005", Level: MUST, Profile: ProfileCore, Statement: "offered only versions outside its range, the plugin refuses cleanly: an incompatible-version handshake, no crash, and it exits", Source: "seed 000 Version Compatibility"},
		{ID: "CORE-INFO-001", Level: MUST, Profile: ProfileCore, Statement: "Info reports the manifest's name, kind, version and API versions", Source: "DESIGN.md Plugins/Protocol (base Info); Packer plugin-check"},
		{ID: "CORE-START-001", Level: MUST, Profile: ProfileCore, Statement: "the plugin is ready (handshake, Info, Configure) within the start timeout", Source: "seed 000 Plugin Lifecycle"},
		{ID: "CORE-STDOUT-001", Level: MUST, Profile: ProfileCore, Statement: "nothing is written to stdout except the handshake line", Source: "DESIGN.md Plugins/Protocol; go-plugin"},
		{ID: "CORE-LOG-001", Level: MUST, Profile: ProfileCore, Statement: "every line on stderr is an hclog JSON record (@level, @message, @timestamp)", Source: "DESIGN.md Dependencies (logging)"},
		{ID: "CORE-HEALTH-001", Level: MUST, Profile: ProfileCore, Statement: "Health answers ok within 2 s", Source: "seed 000 Plugin Lifecycle (health checks)"},
		{ID: "CORE-SHUTDOWN-001", Level: MUST, Profile: ProfileCore, Statement: "asked to shut down, the plugin exits within 3 s", Source: "seed 000 Plugin Lifecycle (UNLOADED)"},
		{ID: "CORE-SHUTDOWN-002", Level: MUST, Profile: ProfileCore, Statement: "when its kernel is killed (SIGKILL), the plugin exits within 5 s", Source: "DESIGN.md L2 sandboxes (no leaked plugins when the kernel dies)"},
		{ID: "CORE-SANDBOX-001", Level: MUST, Profile: ProfileCore, Statement: "the plugin starts inside its declared L2 template (read-only root, non-root uid, no network, all capabilities dropped) and answers Info and Health", Source: "DESIGN.md L2 sandboxes; seed 000 Sandbox Templates"},
		{ID: "CORE-SANDBOX-002", Level: MUST, Profile: ProfileCore, Statement: "inside its L2 sandbox the plugin's kind-specific smoke call works", Source: "DESIGN.md L2 sandboxes"},

		// tool
		{ID: "TOOL-SCHEMA-001", Level: MUST, Profile: ProfileTool, Statement: "ListTools lists exactly the manifest's tools, each with a valid JSON Schema object for its parameters", Source: "DESIGN.md Plugins/Manifest (tools); seed 001 tool signatures"},
		{ID: "TOOL-SCHEMA-002", Level: SHOULD, Profile: ProfileTool, Statement: "ListTools reports the same output_mode and lifetime as plugin.yaml", Source: "DESIGN.md Plugins/Manifest (tools)"},
		{ID: "TOOL-ARGS-001", Level: MUST, Profile: ProfileTool, Statement: "malformed arguments get a structured error result (code, what), never a crash", Source: "DESIGN.md Quality bars; seed 000 Error Display Standard"},
		{ID: "TOOL-PATH-001", Level: MUST, Profile: ProfileTool, Statement: "paths that leave the workspace (.., absolute, symlink out) are refused with a structured error and leak nothing", Source: "seed 000 AI Tools Module; DESIGN.md L2 sandboxes (/workspace)"},
		{ID: "TOOL-OUTPUT-001", Level: MUST, Profile: ProfileTool, Statement: "a tool result's output is at most 2 MiB, however large the input", Source: "seed 000 AI Tools Module (output limits)"},
		{ID: "TOOL-PATCH-001", Level: MUST, Profile: ProfileTool, Statement: "a patch-mode tool's output is a unified diff under /out that applies cleanly to the workspace copy", Source: "seed 000 Output Extraction and Merge"},
		{ID: "TOOL-WRITE-001", Level: MUST, Profile: ProfileTool, Statement: "a tool never modifies the workspace; every write lands under its output directory", Source: "DESIGN.md L2 sandboxes (/workspace read-only, /out)"},
		{ID: "TOOL-PROGRESS-001", Level: SHOULD, Profile: ProfileTool, APIVersions: []int{2}, Statement: "a v2 call cancelled by the kernel returns a cancelled result within the 2 s grace", Source: "plugins/CHANGELOG.md (tool v2 cancel)"},

		// provider
		{ID: "PROVIDER-STREAM-001", Level: MUST, Profile: ProfileProvider, Statement: "streamed text deltas arrive in order and assemble into the upstream text", Source: "DESIGN.md Quality bars (fake provider servers); seed 001 AI loop"},
		{ID: "PROVIDER-TOOLCALL-001", Level: MUST, Profile: ProfileProvider, Statement: "tool-call deltas arrive in order and assemble into the upstream tool call (id, name, JSON arguments)", Source: "DESIGN.md Quality bars (tool_call deltas, input_json_delta)"},
		{ID: "PROVIDER-CANCEL-001", Level: MUST, Profile: ProfileProvider, Statement: "a cancelled stream stops within 2 s and the upstream request is closed", Source: "seed 001 AI loop (cancellation)"},
		{ID: "PROVIDER-ERROR-001", Level: MUST, Profile: ProfileProvider, Statement: "an upstream error (HTTP 429/500) is surfaced as a structured error, not a broken stream", Source: "seed 000 Error Display Standard"},
		{ID: "PROVIDER-PROXY-001", Level: MUST, Profile: ProfileProvider, Statement: "all upstream traffic goes through the kernel's CONNECT proxy", Source: "DESIGN.md L2 sandboxes (ai-provider template)"},

		// runtime
		{ID: "RUNTIME-LIFECYCLE-001", Level: MUST, Profile: ProfileRuntime, Statement: "create/start/stop/remove are idempotent", Source: "DESIGN.md L2 sandboxes (runtime adapters)"},
		{ID: "RUNTIME-LIMITS-001", Level: MUST, Profile: ProfileRuntime, Statement: "memory, pids and network-none limits are enforced on created containers", Source: "seed 000 Sandbox Templates"},
		{ID: "RUNTIME-LABELS-001", Level: MUST, Profile: ProfileRuntime, Statement: "created containers carry the kernel and session labels", Source: "DESIGN.md L2 sandboxes (labels, reaper)"},
		{ID: "RUNTIME-CLEANUP-001", Level: MUST, Profile: ProfileRuntime, Statement: "after remove, nothing the adapter created is left", Source: "DESIGN.md L2 sandboxes (reaper)"},

		// vcs
		{ID: "VCS-STATUS-001", Level: MUST, Profile: ProfileVCS, Statement: "Status on a scratch repository reports the branch and every changed path", Source: "DESIGN.md Plugins (vcs kind)"},
		{ID: "VCS-DIFF-001", Level: MUST, Profile: ProfileVCS, Statement: "Diff returns a unified diff of the working-tree change", Source: "DESIGN.md Plugins (vcs kind)"},
		{ID: "VCS-COMMIT-001", Level: MUST, Profile: ProfileVCS, Statement: "Commit leaves the commit of the given paths in <out>/commits/<id>/ without writing the repository, the kernel's check (host/commit) accepts and applies it, and Log shows it", Source: "DESIGN.md Plugins (vcs kind)"},
		{ID: "VCS-ERROR-001", Level: MUST, Profile: ProfileVCS, Statement: "a commit with an empty message gets a structured error", Source: "seed 000 Error Display Standard"},

		// policy
		{ID: "POLICY-LATENCY-001", Level: MUST, Profile: ProfilePolicy, Statement: "every Evaluate answers within 100 ms", Source: "seed 000 Policy Engine (extension budget 100 ms)"},
		{ID: "POLICY-DECISION-001", Level: MUST, Profile: ProfilePolicy, Statement: "decisions are one of allow, deny, require_review, pass", Source: "seed 000 Policy Engine"},
		{ID: "POLICY-MALFORMED-001", Level: MUST, Profile: ProfilePolicy, Statement: "malformed input gets a structured error or a deny, never a crash", Source: "seed 000 Policy Engine (crash = deny); Error Display Standard"},
	}
}

// ProfilesFor returns the profiles a plugin of kind must pass.
func ProfilesFor(kind string) []string {
	switch kind {
	case ProfileTool, ProfileProvider, ProfileRuntime, ProfileVCS, ProfilePolicy:
		return []string{ProfileCore, kind}
	}
	return []string{ProfileCore}
}

// KnownProfile reports whether p names a profile.
func KnownProfile(p string) bool {
	switch p {
	case ProfileCore, ProfileTool, ProfileProvider, ProfileRuntime, ProfileVCS, ProfilePolicy:
		return true
	}
	return false
}
