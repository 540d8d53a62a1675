package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/host/mcpconfig"
	"github.com/fluffy-waffle/fluffy/textsafe"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// `fluffy mcp`: the MCP servers whose tools the model gets (docs/mcp.md).
// The command table entry, the help topics and the implementation are all
// here.

func runMCP(e *env, args []string) error {
	return subcommands(e, "mcp", args, map[string]func(*env, []string) error{
		"add":    mcpAdd,
		"list":   mcpList,
		"remove": mcpRemove,
		"tools":  mcpToolsCmd,
		"trust":  mcpTrust,
	})
}

const mcpAddUsage = "usage: fluffy mcp add NAME [--scope project|user] [--env K=V]... [--network HOST:PORT]... [--timeout N] -- COMMAND [ARGS...], or fluffy mcp add NAME --url URL"

func mcpHelp() map[string]helpTopic {
	const projectFlag = "  --project DIR   the project directory (default .)\n"
	return map[string]helpTopic{
		"mcp": {usage: "mcp SUBCOMMAND", summary: "add, list, remove MCP servers and list their tools (each runs in its own sandbox)"},
		"mcp add": {usage: "mcp add NAME [--scope project|user] [--env K=V]... [--network HOST:PORT]... [--timeout N] [--project DIR] -- COMMAND [ARGS...]",
			summary: "configure a stdio MCP server; its tools reach the model as mcp.NAME.TOOL",
			text: "Stores the server in $FLUFFY_HOME (never in the project tree). The kernel starts it on first use\n" +
				"inside its own sandbox (no network, the project's read-only view at /workspace, the policy's\n" +
				"toolchains, no host environment); every call goes through the policy (by default reviewed once\n" +
				"per tool) and the audit log. COMMAND is an absolute path (mounted read-only) or a program on the\n" +
				"policy's toolchains (python3, node, npx, uvx). See docs/mcp.md.\n\n" +
				"  --scope S       project (default: this project only) or user (every project)\n" +
				"  --env K=V       an environment variable for the server (repeatable); nothing else is passed\n" +
				"  --network H:P   an endpoint the server may reach through the kernel's proxy (repeatable); the\n" +
				"                  policy must also opt in to the integration-test sandbox and list the host\n" +
				"  --timeout N     seconds one tool call may take (default 60)\n" + projectFlag +
				"\n`fluffy mcp add NAME --url URL` adds a streamable HTTP server instead: no program runs; the\n" +
				"bridge reaches the URL's host alone through the kernel's proxy (and only when the policy's\n" +
				"network_whitelist, if it has one, lists it). A project's .mcp.json applies after `fluffy mcp trust`.\n"},
		"mcp list": {usage: "mcp list [--project DIR] [--json]", summary: "list the configured MCP servers (project and user)",
			text: "Environment values are never shown, only their names.\n\n" + projectFlag + "  --json          one JSON object per server\n"},
		"mcp remove": {usage: "mcp remove NAME [--scope project|user] [--project DIR]", summary: "remove a configured MCP server",
			text: "Without --scope: the project's entry if it has one, else the user's.\n\n" +
				"  --scope S       project or user\n" + projectFlag},
		"mcp trust": {usage: "mcp trust [--project DIR] [--yes]", summary: "let the servers of the project's .mcp.json run, after showing them",
			text: "A project's .mcp.json (the format other agents use) names programs to run, so its servers apply only\n" +
				"once you trusted its exact content: this shows every server (command, arguments, environment names,\n" +
				"URL) and the file's sha256, and asks. Any change to the file needs trusting again. Entries are\n" +
				"checked like `fluffy mcp add`'s; ${VAR} references are passed as written, not expanded, and\n" +
				"entries with HTTP headers are refused. A server configured with `fluffy mcp add` wins by name.\n\n" +
				projectFlag + "  --yes           trust without an interactive question (you reviewed the file)\n"},
		"mcp tools": {usage: "mcp tools NAME [--project DIR] [--sandbox docker|bwrap] [--json]", summary: "start the server in its sandbox and list its tools",
			text: "Starts the server the way a task does (its sandbox, its limits) and prints the tools the model\n" +
				"would get, with their parameter schemas.\n\n" + projectFlag +
				"  --sandbox S     L2 runtime: docker (default) or bwrap\n  --json          one JSON object per tool\n"},
	}
}

// kvList is a repeatable K=V flag.
type kvList map[string]string

func (l kvList) String() string { return "" }
func (l kvList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", textsafe.Line(s, 80))
	}
	l[k] = v
	return nil
}

// strList is a repeatable string flag.
type strList []string

func (l *strList) String() string     { return strings.Join(*l, ",") }
func (l *strList) Set(s string) error { *l = append(*l, s); return nil }

func mcpStore(e *env, project string) (mcpconfig.Store, error) {
	ws, err := filepath.Abs(project)
	if err != nil {
		return mcpconfig.Store{}, err
	}
	return mcpconfig.Store{Home: e.home, Project: ws}, nil
}

func mcpAdd(e *env, args []string) error {
	var before, command []string
	for i, a := range args {
		if a == "--" {
			before, command = args[:i], args[i+1:]
			break
		}
	}
	if command == nil {
		before = args
	}
	fs := newFlags("mcp add")
	project := fs.String("project", ".", "project directory")
	scope := fs.String("scope", mcpconfig.ScopeProject, "project or user")
	timeout := fs.Int("timeout", 0, "seconds per call")
	rawURL := fs.String("url", "", "streamable HTTP endpoint")
	env := kvList{}
	var network strList
	fs.Var(env, "env", "K=V")
	fs.Var(&network, "network", "HOST:PORT")
	pos, err := parseInterspersed(fs, before)
	if err != nil {
		return usageErr("mcp add", err.Error(), mcpAddUsage)
	}
	if len(pos) != 1 {
		return usageErr("mcp add", "expected one NAME before --", mcpAddUsage)
	}
	if *rawURL != "" && len(command) > 0 {
		return usageErr("mcp add", "both --url and a COMMAND after -- were given", "an HTTP server is added with --url alone: fluffy mcp add NAME --url URL")
	}
	if *rawURL == "" && len(command) == 0 {
		return usageErr("mcp add", "no COMMAND after -- (or --url)", mcpAddUsage)
	}
	if *rawURL != "" {
		command = []string{""}
	}
	st, err := mcpStore(e, *project)
	if err != nil {
		return err
	}
	s := mcpconfig.Server{Name: pos[0], Command: command[0], Args: command[1:], URL: *rawURL, Network: network, TimeoutSeconds: *timeout, Scope: *scope}
	if len(env) > 0 {
		s.Env = env
	}
	if err := st.Add(s); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "added MCP server %s (%s): its tools are mcp.%s.TOOL; see them with `fluffy mcp tools %s`\n", s.Name, s.Scope, s.Name, s.Name)
	fmt.Fprintln(e.stdout, "a kernel already running for the project loads it after `fluffy kernel stop`")
	if s.URL != "" {
		fmt.Fprintf(e.stdout, "note: it is reached through the kernel's proxy, which allows its URL's host alone\n")
	}
	if len(network) > 0 {
		fmt.Fprintf(e.stdout, "note: it runs in the integration-test sandbox, which the project policy must allow for plugin %s (sandbox.start), and reaches only hosts the policy's network_whitelist lists\n", s.SpecName())
	}
	return nil
}

func mcpList(e *env, args []string) error {
	fs := newFlags("mcp list")
	project := fs.String("project", ".", "project directory")
	asJSON := fs.Bool("json", false, "JSON lines")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 0 {
		return usageErr("mcp list", "mcp list takes no arguments", "usage: fluffy mcp list [--project DIR] [--json]")
	}
	st, err := mcpStore(e, *project)
	if err != nil {
		return err
	}
	all, err := st.List()
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, s := range all {
			if err := enc.Encode(struct {
				mcpconfig.Server
				EnvNames []string `json:"env_names,omitempty"`
			}{s, s.EnvNames()}); err != nil {
				return err
			}
		}
		return nil
	}
	pj, pjErr := st.ReadProjectJSON()
	switch {
	case pjErr != nil:
		fmt.Fprintf(e.stderr, "note: %s\n", textsafe.Line(uerr.From(pjErr).What+": "+uerr.From(pjErr).Why, 400))
	case pj != nil && !pj.Trusted:
		fmt.Fprintf(e.stderr, "note: %s lists %d servers that do not run until you trust it: `fluffy mcp trust` shows them\n", pj.Path, len(pj.Servers))
	}
	if len(all) == 0 {
		fmt.Fprintln(e.stdout, "no MCP servers configured; add one with `fluffy mcp add NAME -- COMMAND [ARGS...]`")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSCOPE\tCOMMAND\tENV\tNETWORK")
	for _, s := range all {
		cmd := strings.Join(append([]string{s.Command}, s.Args...), " ")
		if s.URL != "" {
			cmd = s.URL
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Scope, textsafe.Line(cmd, 120), strings.Join(s.EnvNames(), ","), strings.Join(s.Network, ","))
	}
	return tw.Flush()
}

func mcpRemove(e *env, args []string) error {
	fs := newFlags("mcp remove")
	project := fs.String("project", ".", "project directory")
	scope := fs.String("scope", "", "project or user")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 1 {
		return usageErr("mcp remove", "expected one NAME", "usage: fluffy mcp remove NAME [--scope project|user]")
	}
	st, err := mcpStore(e, *project)
	if err != nil {
		return err
	}
	from, err := st.Remove(pos[0], *scope)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "removed MCP server %s (%s)\n", pos[0], from)
	return nil
}

func mcpToolsCmd(e *env, args []string) error {
	fs := newFlags("mcp tools")
	project := fs.String("project", ".", "project directory")
	sb := fs.String("sandbox", envOr(e.getenv, "FLUFFY_SANDBOX", "docker"), "docker or bwrap")
	asJSON := fs.Bool("json", false, "JSON lines")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 1 {
		return usageErr("mcp tools", "expected one NAME", "usage: fluffy mcp tools NAME [--project DIR] [--json]")
	}
	if *sb == kernelapi.SandboxNone {
		return usageErr("mcp tools", "--sandbox none is refused for MCP servers", "MCP servers run only in a sandbox: use --sandbox docker or bwrap")
	}
	st, err := mcpStore(e, *project)
	if err != nil {
		return err
	}
	if _, err := st.Get(pos[0]); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	k, err := kernelapi.OpenLocal(ctx, kernelapi.LocalOptions{
		Home: e.home, Project: st.Project, Logger: e.log, Sandbox: *sb, Getenv: e.getenv,
		BuiltinDirs: builtinPluginDirs(e),
		Progress:    func(s string) { fmt.Fprintf(e.stderr, "  %s...\n", s) },
	})
	if err != nil {
		return err
	}
	defer k.Close()
	fmt.Fprintf(e.stderr, "  starting MCP server %s...\n", pos[0])
	tools, err := k.MCPTools(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, t := range tools {
			if err := enc.Encode(map[string]any{"name": t.Name, "summary": t.Summary, "parameters": json.RawMessage(t.ParametersJSON)}); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(e.stdout, "%s tools from MCP server %s:\n", strconv.Itoa(len(tools)), pos[0])
	for _, t := range tools {
		fmt.Fprintf(e.stdout, "  %s  %s\n    parameters: %s\n", t.Name, textsafe.Line(t.Summary, 200), textsafe.Line(string(t.ParametersJSON), 400))
	}
	return nil
}

func mcpTrust(e *env, args []string) error {
	fs := newFlags("mcp trust")
	project := fs.String("project", ".", "project directory")
	yes := fs.Bool("yes", false, "trust without asking")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 0 {
		return usageErr("mcp trust", "mcp trust takes no arguments", "usage: fluffy mcp trust [--project DIR] [--yes]")
	}
	st, err := mcpStore(e, *project)
	if err != nil {
		return err
	}
	pj, err := st.ReadProjectJSON()
	if err != nil {
		return err
	}
	if pj == nil {
		return uerr.New(mcpconfig.CodeNotFound, "the project has no "+mcpconfig.MCPJSONName, "there is nothing to trust in "+st.Project, "add servers with `fluffy mcp add`, or write a .mcp.json")
	}
	w := e.stdout
	fmt.Fprintf(w, "%s (sha256 %s) lists %d MCP servers:\n", pj.Path, pj.SHA256, len(pj.Servers))
	for _, s := range pj.Servers {
		if s.URL != "" {
			fmt.Fprintf(w, "  %s  url %s\n", s.Name, textsafe.Line(s.URL, 300))
			continue
		}
		fmt.Fprintf(w, "  %s  runs %s\n", s.Name, textsafe.Line(strings.Join(append([]string{s.Command}, s.Args...), " "), 600))
		if names := s.EnvNames(); len(names) > 0 {
			fmt.Fprintf(w, "      environment: %s\n", strings.Join(names, ", "))
		}
	}
	if pj.Trusted {
		fmt.Fprintln(w, "This content is already trusted.")
		return nil
	}
	if pj.TrustedOther {
		fmt.Fprintln(w, "The file changed since you trusted it.")
	}
	approved := *yes
	if !approved {
		if !e.isTTY {
			return uerr.New("MCP_TRUST_REVIEW_REQUIRED", "the project's .mcp.json is not trusted",
				"its servers are programs fluffy would start, so they run only once you approved the file, and there is no terminal to ask on",
				"review the servers above, then run `fluffy mcp trust --yes`")
		}
		ans, err := ask(e, "Run these servers (each in its own sandbox) in this project? [y/N] ")
		if err != nil {
			return err
		}
		approved = ans == "y" || ans == "yes"
	}
	if !approved {
		return uerr.New("MCP_TRUST_REJECTED", "the project's .mcp.json is not trusted", "you did not approve it", "its servers do not run; `fluffy mcp trust` asks again")
	}
	if err := st.TrustProjectJSON(pj.SHA256); err != nil {
		return err
	}
	fmt.Fprintf(w, "Trusted: its servers run from the next kernel start (sha256 %s).\n", pj.SHA256[:12])
	return nil
}
