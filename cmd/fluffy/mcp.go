package main

import (
	"context"
	"encoding/json"
	"flag"
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
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// `fluffy mcp`: the MCP servers whose tools the model gets (docs/mcp.md).
// Its command definition and its implementation are both here.

// mcpAddUsage is the usage of `mcp add`, from its forms.
func mcpAddUsage() string {
	var forms []string
	for _, f := range mcpCmd().sub("add").forms {
		forms = append(forms, "fluffy mcp add "+f)
	}
	return "usage: " + strings.Join(forms, ", or ")
}

func mcpCmd() *cmd {
	return &cmd{name: "mcp", short: "add, list, remove MCP servers and list their tools (each runs in its own sandbox)", subs: []*cmd{
		{name: "add", rawArgs: true, short: "configure an MCP server; its tools reach the model as mcp.NAME.TOOL",
			forms: []string{
				"NAME [--scope project|user] [--env K=V]... [--network HOST:PORT]... [--timeout N] [--project DIR] -- COMMAND [ARGS...]",
				"NAME --url URL [--scope project|user] [--timeout N] [--project DIR]",
			},
			long: "Stores the server in $FLUFFY_HOME (never in the project tree). The kernel starts it on first use\n" +
				"inside its own sandbox (no network, the project's read-only view at /workspace, the policy's\n" +
				"toolchains, no host environment); every call goes through the policy (by default reviewed once\n" +
				"per tool) and the audit log. COMMAND is an absolute path (mounted read-only) or a program on the\n" +
				"policy's toolchains (python3, node, npx, uvx). See docs/mcp.md.\n\n" +
				"With --url it adds a streamable HTTP server instead: no program runs; the bridge reaches the\n" +
				"URL's host alone through the kernel's proxy (and only when the policy's network_whitelist, if\n" +
				"it has one, lists it). A project's .mcp.json applies after `fluffy mcp trust`.\n",
			flags: mcpAddFlags},
		{name: "list", short: "list the configured MCP servers (project and user)",
			long: "Environment values are never shown, only their names.\n", flags: mcpListFlags},
		{name: "remove", args: "NAME", short: "remove a configured MCP server",
			long: "Without --scope: the project's entry if it has one, else the user's.\n", flags: mcpRemoveFlags},
		{name: "trust", short: "let the servers of the project's .mcp.json run, after showing them",
			long: "A project's .mcp.json (the format other agents use) names programs to run, so its servers apply only\n" +
				"once you trusted its exact content: this shows every server (command, arguments, environment names,\n" +
				"URL) and the file's sha256, and asks. Any change to the file needs trusting again. Entries are\n" +
				"checked like `fluffy mcp add`'s; ${VAR} references are passed as written, not expanded, and\n" +
				"entries with HTTP headers are refused. A server configured with `fluffy mcp add` wins by name.\n", flags: mcpTrustFlags},
		{name: "tools", args: "NAME", short: "start the server in its sandbox and list its tools",
			long: "Starts the server the way a task does (its sandbox, its limits) and prints the tools the model\n" +
				"would get, with their parameter schemas.\n", flags: mcpToolsFlags},
	}}
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
func (kvList) repeatable() {}

func mcpStore(e *env, project string) (mcpconfig.Store, error) {
	ws, err := filepath.Abs(project)
	if err != nil {
		return mcpconfig.Store{}, err
	}
	return mcpconfig.Store{Home: e.home, Project: ws}, nil
}

func mcpAddFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	scope := fs.String("scope", mcpconfig.ScopeProject, "`project|user` this project only, or every project")
	timeout := fs.Int("timeout", 0, "`N` seconds one tool call may take (default 60)")
	rawURL := fs.String("url", "", "`URL` a streamable HTTP server's endpoint, instead of a COMMAND")
	env := kvList{}
	var network strList
	fs.Var(env, "env", "`K=V` an environment variable for the server; nothing else is passed")
	fs.Var(&network, "network", "`HOST:PORT` an endpoint the server may reach through the kernel's proxy; the policy\nmust also opt in to the integration-test sandbox and list the host")
	return func(args []string) error { return mcpAdd(e, fs, args, project, scope, timeout, rawURL, env, &network) }
}

func mcpAdd(e *env, fs *flag.FlagSet, args []string, project, scope *string, timeout *int, rawURL *string, env kvList, networkFlag *strList) error {
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
	pos, err := parseInterspersed(fs, before)
	network := *networkFlag // filled by the parse above
	if err != nil {
		return usageErr("mcp add", err.Error(), mcpAddUsage())
	}
	if len(pos) != 1 {
		return usageErr("mcp add", "expected one NAME before --", mcpAddUsage())
	}
	if *rawURL != "" && len(command) > 0 {
		return usageErr("mcp add", "both --url and a COMMAND after -- were given", "an HTTP server is added with --url alone: fluffy mcp add NAME --url URL")
	}
	if *rawURL == "" && len(command) == 0 {
		return usageErr("mcp add", "no COMMAND after -- (or --url)", mcpAddUsage())
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

func mcpListFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	asJSON := fs.Bool("json", false, "one JSON object per server")
	return func([]string) error { return mcpList(e, project, asJSON) }
}

func mcpList(e *env, project *string, asJSON *bool) error {
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

func mcpRemoveFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	scope := fs.String("scope", "", "`project|user` which entry to remove")
	return func(pos []string) error { return mcpRemove(e, project, scope, pos) }
}

func mcpRemove(e *env, project, scope *string, pos []string) error {
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

func mcpToolsFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	sb := fs.String("sandbox", envOr(e.getenv, "FLUFFY_SANDBOX", "docker"), "`docker|bwrap` the L2 runtime ($FLUFFY_SANDBOX sets the default)")
	asJSON := fs.Bool("json", false, "one JSON object per tool")
	return func(pos []string) error { return mcpTools(e, project, sb, asJSON, pos) }
}

func mcpTools(e *env, project, sb *string, asJSON *bool, pos []string) error {
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

func mcpTrustFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	yes := fs.Bool("yes", false, "trust without an interactive question (you reviewed the file)")
	return func([]string) error { return mcpTrust(e, project, yes) }
}

func mcpTrust(e *env, project *string, yes *bool) error {
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
