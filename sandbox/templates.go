package sandbox

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/lib/units"
)

// Network modes of a template.
const (
	// NetNone: no network namespace interfaces at all.
	NetNone = "none"
	// NetProxy: no interfaces; outbound HTTPS only through the kernel's
	// CONNECT proxy on a bind-mounted unix socket, with a host allowlist.
	NetProxy = "proxy"
)

// Seccomp profile names.
const (
	SeccompStrict      = "strict"
	SeccompStandard    = "standard"
	SeccompStandardNet = "standard-net"
)

// Template is one sandbox template.
type Template struct {
	Name    string
	Network string
	Seccomp string
	Limits  Limits
	// OCIRuntime is "" (engine default, runc) or "runsc" (gVisor).
	OCIRuntime string
	// RequiresPolicy marks templates the policy must opt into
	// (`require_sandbox: integration-test`).
	RequiresPolicy bool
	// RunsCode marks templates that build and run project code: they get
	// the policy's toolchains and the build cache (for plugins declaring
	// the capabilities) and an executable, larger /tmp.
	RunsCode bool
}

// goPluginMinPids replaces the 10 (ai-provider) and 5
// (policy-sandbox) pids: the cgroup counts threads, and a Go go-plugin
// server needs about 8 even with GOMAXPROCS=1, so 5 made plugins crash at
// random ("failed to create new OS thread"). Both templates use the strict
// seccomp profile, which already forbids new processes; the pids limit there
// only bounds threads.
const goPluginMinPids = 16

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// Templates returns the templates by name. A fresh map each call:
// callers may adjust their copy (for example to pick runsc).
func Templates() map[string]Template {
	return map[string]Template{
		"ai-provider": {Name: "ai-provider", Network: NetProxy, Seccomp: SeccompStrict,
			Limits: Limits{MemoryBytes: 256 * mib, CPUs: 0.5, Pids: goPluginMinPids, Timeout: 120 * time.Second, OutBytes: 16 * mib}},
		"code-executor": {Name: "code-executor", Network: NetNone, Seccomp: SeccompStandard, RunsCode: true,
			Limits: Limits{MemoryBytes: 1 * gib, CPUs: 1.0, Pids: 100, Timeout: 300 * time.Second, OutBytes: 1 * gib}},
		"policy-sandbox": {Name: "policy-sandbox", Network: NetNone, Seccomp: SeccompStrict,
			Limits: Limits{MemoryBytes: 128 * mib, CPUs: 0.25, Pids: goPluginMinPids, Timeout: 100 * time.Millisecond, OutBytes: 16 * mib}},
		"integration-test": {Name: "integration-test", Network: NetProxy, Seccomp: SeccompStandardNet, RequiresPolicy: true, RunsCode: true,
			Limits: Limits{MemoryBytes: 1 * gib, CPUs: 1.0, Pids: 100, Timeout: 300 * time.Second, OutBytes: 1 * gib}},
	}
}

// DefaultTemplate is the template for a plugin kind whose manifest names none.
func DefaultTemplate(kind string) string {
	switch kind {
	case "provider":
		return "ai-provider"
	case "policy":
		return "policy-sandbox"
	default:
		return "code-executor"
	}
}

// TemplateNames lists the template names, sorted.
func TemplateNames() []string {
	ts := Templates()
	out := make([]string, 0, len(ts))
	for n := range ts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LookupTemplate returns the named template or a SANDBOX_UNKNOWN_TEMPLATE error.
func LookupTemplate(name string) (Template, error) {
	t, ok := Templates()[name]
	if !ok {
		return Template{}, uerr.New("SANDBOX_UNKNOWN_TEMPLATE",
			fmt.Sprintf("unknown sandbox template %q", name),
			"fluffy knows the templates "+strings.Join(TemplateNames(), ", "),
			"set `sandbox.template` in plugin.yaml to one of them")
	}
	return t, nil
}

// CodeLimitAboveTemplate: a plugin asks for more than its template allows.
const CodeLimitAboveTemplate = "SANDBOX_LIMIT_ABOVE_TEMPLATE"

// CheckCeiling reports limits that raise the template's: a template's limits
// are ceilings, a manifest may only lower them. Zero fields mean "the
// template's value" and always pass. The error names every raised limit
// with the template's value.
func (t Template) CheckCeiling(plugin string, l Limits) error {
	var over []string
	if l.MemoryBytes > t.Limits.MemoryBytes {
		over = append(over, fmt.Sprintf("memory %s > %s", units.FormatSize(l.MemoryBytes), units.FormatSize(t.Limits.MemoryBytes)))
	}
	if l.CPUs > t.Limits.CPUs {
		over = append(over, fmt.Sprintf("cpu %g > %g", l.CPUs, t.Limits.CPUs))
	}
	if l.Pids > t.Limits.Pids {
		over = append(over, fmt.Sprintf("pids %d > %d", l.Pids, t.Limits.Pids))
	}
	if l.OutBytes > t.Limits.OutBytes {
		over = append(over, fmt.Sprintf("/out %s > %s", units.FormatSize(l.OutBytes), units.FormatSize(t.Limits.OutBytes)))
	}
	if l.Timeout > t.Limits.Timeout {
		over = append(over, fmt.Sprintf("timeout %s > %s", l.Timeout, t.Limits.Timeout))
	}
	if len(over) == 0 {
		return nil
	}
	return uerr.New(CodeLimitAboveTemplate,
		fmt.Sprintf("plugin %s asks for more than the %s sandbox template allows", plugin, t.Name),
		"its manifest raises "+strings.Join(over, ", ")+" (the template's values are ceilings: a manifest may lower them, never raise them)",
		fmt.Sprintf("lower or remove those sandbox overrides in plugin.yaml (at most the %s template's values), or choose a template whose limits fit", t.Name))
}

// Effective merges a template with the limits a LaunchSpec asks for: a
// manifest may tighten a limit, never loosen it beyond the template.
func (t Template) Effective(l Limits) Limits {
	out := t.Limits
	if l.MemoryBytes > 0 && l.MemoryBytes < out.MemoryBytes {
		out.MemoryBytes = l.MemoryBytes
	}
	if l.CPUs > 0 && l.CPUs < out.CPUs {
		out.CPUs = l.CPUs
	}
	if l.Pids > 0 && l.Pids < out.Pids {
		out.Pids = l.Pids
	}
	if l.Timeout > 0 && l.Timeout < out.Timeout {
		out.Timeout = l.Timeout
	}
	if l.OutBytes > 0 && l.OutBytes < out.OutBytes {
		out.OutBytes = l.OutBytes
	}
	return out
}

// SelectRuntime validates an OCI runtime choice for a template against what
// the engine offers: "runsc" needs gVisor registered with the engine.
func SelectRuntime(want string, offered []string) (string, error) {
	if want == "" || want == "runc" {
		return "", nil
	}
	if slices.Contains(offered, want) {
		return want, nil
	}
	return "", uerr.New("SANDBOX_RUNTIME_UNAVAILABLE",
		fmt.Sprintf("the OCI runtime %q is not available", want),
		"the container engine offers "+strings.Join(offered, ", "),
		"install gVisor (`apt install runsc`), register it with the engine (`runsc install` then restart dockerd), or choose the default runtime")
}
