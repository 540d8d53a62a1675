package main

import (
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"

	"github.com/fluffy-waffle/fluffy/uerr"
)

// helpTopic is the help of one command or subcommand. `fluffy help X Y`,
// `fluffy X Y --help` and `fluffy X Y -h` all print exactly this (to stdout,
// exit 0): one place, so the three ways cannot drift apart.
type helpTopic struct {
	// usage is the synopsis, without the leading "fluffy ".
	usage string
	// summary is the one line shown in the parent's list.
	summary string
	// text says what the command does, then its flags.
	text string
	// hidden topics (internal verbs) are not listed in the parent's help.
	hidden bool
}

// helpTopics maps a command path ("plugin install") to its help. Every
// command and subcommand the dispatcher knows has an entry
// (TestHelpCoversEveryCommand).
func helpTopics() map[string]helpTopic {
	const projectFlag = "  --project DIR   the project directory (default .)\n"
	topics := map[string]helpTopic{
		"help": {usage: "help [COMMAND [SUBCOMMAND]]", summary: "show the help of fluffy or of one command",
			text: "The same text as `fluffy COMMAND [SUBCOMMAND] --help` or `-h`.\n"},
		"version": {usage: "version [--json]", summary: "print fluffy's version and the plugin API versions it speaks",
			text: "Prints fluffy's version and the range of plugin API versions this fluffy speaks\n" +
				"(a plugin's plugin.yaml api_versions must include one of them).\n\n" +
				"  --json   {\"version\": ..., \"plugin_api_versions\": [...], \"plugin_api_min\": N, \"plugin_api_max\": N}\n"},
		"attach": {usage: "attach [--project DIR] [--json] [--after SEQ]", summary: "follow the project's running task",
			text: "Follows the task the project's kernel is running (after the terminal that started it left).\n\n" +
				projectFlag + "  --json          print events as JSON lines\n  --after SEQ     only events after this sequence number\n"},

		"audit": {usage: "audit SUBCOMMAND", summary: "inspect, verify, export the project's audit log"},
		"audit log": {usage: "audit log [--since T] [--until T] [--type a,b] [--session ID] [--limit N] [--json] [--project DIR] [--db DIR]",
			summary: "show audit records, newest last",
			text: "  --since T       only records at or after T (RFC 3339, a date, or a duration ago such as 2h)\n" +
				"  --until T       only records at or before T\n  --type a,b      only these event types\n" +
				"  --session ID    only records of this session\n  --limit N       the newest N matching records (default 50; 0 = all)\n" +
				"  --json          one JSON record per line\n" + projectFlag + "  --db DIR        the database directory (default <project>/.fluffy/db)\n"},
		"audit verify": {usage: "audit verify [--all] [--file export.jsonl] [--json] [--project DIR] [--db DIR]",
			summary: "check the audit log's hash chain",
			text: "  --all           verify every record, not only the tail\n  --file F        verify a JSONL export instead of the database\n" +
				"  --json          print the report as JSON\n" + projectFlag + "  --db DIR        the database directory\n"},
		"audit export": {usage: "audit export [-o FILE] [--project DIR] [--db DIR]", summary: "write the audit log as JSON lines",
			text: "  -o FILE         write to FILE instead of stdout\n" + projectFlag + "  --db DIR        the database directory\n"},
		"audit stats": {usage: "audit stats [--json] [--project DIR] [--db DIR]", summary: "count audit records by type",
			text: "  --json          print as JSON\n" + projectFlag + "  --db DIR        the database directory\n"},

		"prompt": {usage: "prompt SUBCOMMAND", summary: "show the system prompt the model reads next (workflow, project brief, tools)"},
		"prompt show": {usage: "prompt show [--project DIR] [--json]", summary: "print the system prompt of the session's next model request",
			text: "Prints what the model reads before the next task: the workflow state and what is writable, the\n" +
				"project's brief (languages, the top of the file tree, the branch) and its instructions (AGENTS.md,\n" +
				"or CLAUDE.md, at the root and on the way to the files the session touched), the tools. Starts the\n" +
				"project's kernel if it is not running. The REPL's /prompt prints the same.\n\n" +
				projectFlag + "  --json          {\"system\": ..., \"tokens\": N}\n"},
		"config": {usage: "config SUBCOMMAND", summary: "init, get, set and show settings (flags > FLUFFY_* > project > user > defaults)"},
		"config init": {usage: "config init [init's flags]", summary: "the same as `fluffy init`",
			text: "`fluffy config init` is another name of `fluffy init` (see `fluffy init --help`): the same flags,\n" +
				"the same file (the project's .fluffy/config.yaml; --user for $FLUFFY_HOME/config.yaml).\n"},
		"init": {usage: "init [--provider openai|anthropic|ollama|replay] [--model NAME] [--cassette FILE] [--project DIR] [--user] [--yes] [--force]",
			summary: "set fluffy up for this project: detect it, pick a provider, write .fluffy/config.yaml",
			text: "Says what fluffy sees in the project (Go go.mod, Python pyproject.toml/setup.py/pytest.ini/setup.cfg,\n" +
				"Node package.json, Rust Cargo.toml, and the test runner of each), what the active policy lets the AI\n" +
				"write and why, and what each provider needs; then asks for a provider and a model and writes\n" +
				"<project>/.fluffy/config.yaml. Without a terminal, or with --yes, it asks nothing: --provider is\n" +
				"then required. The API key is never written: it stays in OPENAI_API_KEY / ANTHROPIC_API_KEY (or a\n" +
				"key file named by providers.NAME.api_key_file). `fluffy config init` is the same command.\n\n" +
				"  --provider P    openai, anthropic, ollama or replay\n  --model NAME    the model (default: the provider's, e.g. gpt-4.1)\n" +
				"  --cassette FILE replay: the cassette to play (stored as an absolute path)\n" + projectFlag +
				"  --user          write $FLUFFY_HOME/config.yaml instead of the project's\n" +
				"  --yes           write without asking\n  --force         replace an existing file\n"},
		"config get": {usage: "config get KEY [--project DIR]", summary: "print one setting's effective value",
			text: "Keys: see `fluffy config show --all`.\n\n" + projectFlag},
		"config set": {usage: "config set KEY VALUE [--project]", summary: "change one setting",
			text: "  --project       write the project's .fluffy/config.yaml instead of the user's\n"},
		"config show": {usage: "config show [--all] [--json] [--project DIR]", summary: "print the effective settings and where each comes from",
			text: "  --all           list every setting with its type and documentation\n  --json          machine-readable output\n" + projectFlag},

		"conformance": {usage: "conformance SUBCOMMAND", summary: "list the conformance catalogue; run it on a plugin (JSON/JUnit reports)"},
		"conformance list": {usage: "conformance list [--profile P] [--json]", summary: "list the conformance items",
			text: "  --profile P     only this profile\n  --json          print the catalogue as JSON\n"},
		"conformance run": {usage: "conformance run PATH [--profile core,tool] [--json FILE] [--junit FILE] [--sandbox docker|none] [--start-timeout D] [--config JSON]",
			summary: "certify the plugin in PATH (a directory with plugin.yaml)",
			text: "  --profile P,Q   profiles to run (default: core + the plugin's kind)\n" +
				"  --json FILE     also write the report as JSON\n  --junit FILE    also write the report as JUnit XML\n" +
				"  --sandbox S     docker: every item in the plugin's L2 container (default, or $FLUFFY_SANDBOX);\n" +
				"                  none: a plain process with your privileges (development only)\n" +
				"  --start-timeout D  how long the plugin may take to become ready (default 10s)\n" +
				"  --config JSON   Configure settings for a provider under test (the suite's base_url\n" +
				"                  and api_key win; it also sends its probes' answers as cassette unless JSON\n" +
				"                  has cassette or builtin_cassette), e.g. '{\"model\":\"m\"}'\n"},
		"conformance stub-kernel": {usage: "conformance stub-kernel", summary: "internal: the throwaway kernel a conformance item kills", hidden: true},

		"kernel": {usage: "kernel [run] [--project DIR] [--idle 10m] [--log FILE] | kernel SUBCOMMAND",
			summary: "run the project's kernel process (normally started for you); status, stop",
			text: "Without a subcommand (or with run): runs the project's kernel in the foreground. fluffy\n" +
				"normally starts it for you (in its L1 container, or as a local process with --l1 none).\n\n" +
				projectFlag + "  --idle D        exit after D with no client and no running task (default 10m; 0: never)\n" +
				"  --log FILE      also append the kernel's log to FILE\n"},
		"kernel run":    {usage: "kernel run [--project DIR] [--idle 10m] [--log FILE]", summary: "run the project's kernel in the foreground", hidden: true},
		"kernel status": {usage: "kernel status [--project DIR]", summary: "is the project's kernel running, and what is it doing", text: projectFlag},
		"kernel stop":   {usage: "kernel stop [--project DIR]", summary: "stop the project's kernel", text: projectFlag},

		"plugin": {usage: "plugin SUBCOMMAND", summary: "install, list, inspect, enable, disable and remove plugins; write your own"},
		"plugin install": {usage: "plugin install PATH [--yes] [--grant TAG]... [--force] [--sandbox docker|none] [--json]",
			summary: "install the plugin in PATH (a directory with plugin.yaml) after you approved it",
			text: "Validates the manifest and the binary's sha256, shows what the plugin asks for and asks you\n" +
				"(on a terminal); only then runs certification (the conformance profile of its kind) and copies\n" +
				"it into $FLUFFY_HOME/plugins. Without a terminal, pass --yes after reviewing the plugin.\n\n" +
				"  --yes           approve without asking (grants no tag)\n" +
				"  --grant TAG     grant a tag the plugin requests, e.g. trusted_write (repeatable)\n" +
				"  --force         allow a downgrade, a reinstall, or a failed certification\n" +
				"  --sandbox S     docker: certification runs it in its L2 container (default, or $FLUFFY_SANDBOX);\n" +
				"                  none: a plain process with your privileges (development only)\n" +
				"  --json          print the installed record as JSON\n"},
		"plugin list": {usage: "plugin list [--rejected] [--json]", summary: "list installed and builtin plugins",
			text: "Lists every plugin version the registry in $FLUFFY_HOME knows, fluffy's builtin plugins\n" +
				"included (they are registered before listing).\n\n" +
				"STATE is what the registry records for that version, never whether a process runs now:\n" +
				"  registered  usable: a kernel starts it in its sandbox on first use\n" +
				"  disabled    you disabled it (`fluffy plugin enable NAME` to use it again)\n" +
				"  rejected    a kernel refused to load it; `fluffy plugin info NAME` says why\n" +
				"CERTIFIED is the recorded conformance verdict for this version's sha256.\n\n" +
				"  --rejected      list rejected manifests and why instead\n  --json          machine-readable output (stable)\n"},
		"plugin info": {usage: "plugin info NAME [--json]", summary: "show one plugin: manifest, tags, integrity, certification",
			text: "  --json          every installed version as JSON\n"},
		"plugin remove":  {usage: "plugin remove NAME[@VERSION]", summary: "remove a plugin (every version, or one)"},
		"plugin enable":  {usage: "plugin enable NAME", summary: "enable a disabled plugin"},
		"plugin disable": {usage: `plugin disable NAME --reason "why"`, summary: "disable a plugin; kernels stop loading it", text: "  --reason R      why (required; shown in list and info and to whoever calls it)\n"},
		"plugin call": {usage: "plugin call PLUGIN TOOL [ARGS_JSON] [--project DIR] [--timeout D] [--sandbox docker|bwrap|none]",
			summary: "run one tool of a plugin by hand (through policy, in its sandbox)",
			text: "Runs TOOL of PLUGIN with ARGS_JSON (default {}) the way the AI would: arguments checked against\n" +
				"the tool's schema, policy, the plugin's L2 sandbox; writes only reach the output directory.\n\n" +
				"  --project DIR   the project the plugin sees read-only (must exist; default .)\n" +
				"  --timeout D     deadline for the call (default 2m)\n" +
				"  --sandbox S     docker (default, or $FLUFFY_SANDBOX), bwrap, or none (development only)\n"},
		"plugin grant":  {usage: "plugin grant NAME TAG", summary: "grant a tag the plugin requested (e.g. trusted_write); recorded and audited"},
		"plugin revoke": {usage: "plugin revoke NAME TAG", summary: "revoke a granted tag"},
		"plugin new": {usage: "plugin new NAME [--dir DIR] [--module PATH] [--sdk DIR]",
			summary: "create a tool plugin project from the template",
			text: "Writes DIR (default ./NAME): main.go (one tool on the SDK), main_test.go (the SDK's test kit),\n" +
				"plugin.yaml, go.mod and a Makefile whose `make` builds a static binary (CGO_ENABLED=0) and\n" +
				"stamps its sha256 into plugin.yaml (`fluffy plugin stamp`). Fields: docs/plugin-yaml.md.\n\n" +
				"  --dir DIR       where to write (must not exist or be empty; default ./NAME)\n" +
				"  --module PATH   the Go module path (default example.com/NAME)\n" +
				"  --sdk DIR       a fluffy source checkout for go.mod's replace directive (default: the\n" +
				"                  checkout this fluffy was built from, if it still exists)\n"},
		"plugin dev": {usage: "plugin dev DIR [--yes] [--grant TAG]... [--sandbox docker|none]",
			summary: "rebuild, stamp and reinstall the plugin you are writing in DIR",
			text: "Builds the Go package in DIR into the manifest's entry (CGO_ENABLED=0), stamps its sha256,\n" +
				"then installs it as `plugin install` does (your approval of this binary, certification in\n" +
				"its sandbox), replacing the installed copy of the same version. Kernels start plugins when\n" +
				"first used: the next `plugin call` or session runs the new build; a kernel already running\n" +
				"keeps the instance it started.\n\n" +
				"  --yes           approve without asking (grants no tag)\n" +
				"  --grant TAG     grant a tag the plugin requests (repeatable)\n" +
				"  --sandbox S     docker (default, or $FLUFFY_SANDBOX) or none (development only)\n"},
		"plugin stamp": {usage: "plugin stamp DIR", summary: "write the entry binary's sha256 into DIR/plugin.yaml",
			text: "Checks that the entry binary can run in the empty sandbox image (statically linked), then\n" +
				"writes its sha256 into plugin.yaml, keeping the rest of the file as it is.\n"},

		"policy": {usage: "policy SUBCOMMAND", summary: "show, validate, explain, update and trust the security policy"},
		"policy show": {usage: "policy show [--project DIR]", summary: "print the active policy",
			text: "The active policy is <project>/.fluffy/policy.yaml once you trusted its content (`fluffy policy\n" +
				"trust`, or written by `fluffy policy update`), else the built-in default.\n\n" + projectFlag},
		"policy validate": {usage: "policy validate FILE", summary: "check a policy file (rules, examples, counter-examples)"},
		"policy explain": {usage: "policy explain --syscall S [--path P] [--host H] [--size N] [--sandbox T] [--caller NAME] [--plugin-kind K] [--tag T]... [--declared-host H]... [--mode M] [--state S] [--all] [--project DIR]",
			summary: "show the decision and the rules behind it for one request, and which files count as tests",
			text: "  --syscall S     syscall type, e.g. fs.write (required)\n  --path P        project-relative path (trailing / = directory); says whether it is a test or a source file\n" +
				"  --host H        network host\n  --size N        size, e.g. 2KiB\n  --sandbox T     L2 template the operation runs in\n" +
				"  --caller NAME   calling plugin (empty: the user)\n  --plugin-kind K the caller's kind\n" +
				"  --tag T         a caller tag (repeatable)\n  --declared-host H  a host the caller's manifest declares (repeatable)\n" +
				"  --mode M        session mode: strict, explore, debug\n  --state S       workflow state\n" +
				"  --all           also list rules that were evaluated but did not match\n" + projectFlag},
		"policy update": {usage: "policy update FILE [--yes] [--confirm PHRASE] [--project DIR]",
			summary: "replace the project's policy after review (diff, trial replay of recent audit entries)",
			text: "  --yes           approve without an interactive review (you reviewed the diff)\n" +
				"  --confirm P     the confirmation phrase, needed when more than 5 changes are breaking\n" + projectFlag +
				"The content written is trusted (pinned by sha256 in $FLUFFY_HOME/trust/policies).\n"},
		"policy trust": {usage: "policy trust [--yes] [--project DIR]",
			summary: "review the project's policy file and trust it (a clone's, or one edited by hand)",
			text: "A project's .fluffy/policy.yaml applies only once you trusted its exact content: a cloned\n" +
				"repository can ship any policy (mode: observe, an allow-everything rule). Until then, and\n" +
				"after any change not made through `fluffy policy update`, the embedded default applies and\n" +
				"fluffy says so (kernel log, audit log, policy show/explain, the REPL banner and /status, a\n" +
				"one-shot task's stderr). This command shows the file's changes against the version you\n" +
				"trusted last (or the embedded default), asks, and pins its sha256 in\n" +
				"$FLUFFY_HOME/trust/policies; a running kernel applies it within a second.\n\n" +
				"  --yes           trust without asking (you reviewed the file); needed without a terminal\n" + projectFlag},

		"sandbox": {usage: "sandbox SUBCOMMAND", summary: "list (ls) and clean up (gc) plugin sandbox containers"},
		"sandbox ls": {usage: "sandbox ls [--orphans]", summary: "list this home's sandbox containers and volumes",
			text: "  --orphans       only resources whose kernel is gone\n"},
		"sandbox gc": {usage: "sandbox gc [--all]", summary: "remove this home's orphaned sandboxes",
			text: "  --all           also remove sandboxes of this home's running kernels (never another home's)\n"},

		"session": {usage: "session SUBCOMMAND", summary: "list, show, resume, archive or start this project's sessions",
			text: "A project has sessions; its kernel serves the current one: workflow state and mode, proposed\n" +
				"changes, workflow history and the conversation with the model (pins included), all kept in the\n" +
				"project's database. Switching sessions (new, resume, archiving the current one) makes the kernel\n" +
				"exit after answering; the next command starts it on the new current session.\n"},
		"session list": {usage: "session list [--project DIR] [--json]", summary: "list the project's sessions",
			text: "One line per session, archived ones included: id, last use, mode, state, proposed changes not\n" +
				"merged, title (its first task); * marks the current one.\n\n" + projectFlag + "  --json          machine-readable output\n"},
		"session show": {usage: "session show [ID] [--project DIR] [--json]", summary: "show one session (default: the current one)",
			text: "Prints a session as JSON: its summary, workflow history and conversation (and, for the current\n" +
				"one, its live status).\n\n" + projectFlag + "  --json          machine-readable output (the only output)\n"},
		"session resume": {usage: "session resume ID [--project DIR] [--json]", summary: "make a session current again",
			text: "Makes session ID the current one (un-archiving it) with its state, mode, proposed changes,\n" +
				"history and conversation. Refused while a task runs.\n\n" + projectFlag + "  --json          machine-readable output\n"},
		"session archive": {usage: "session archive [ID] [--force] [--project DIR] [--json]", summary: "put a session away (default: the current one)",
			text: "Marks the session archived (`session resume` brings it back). Refused while a task runs, and while\n" +
				"the session has proposed changes not merged unless --force. Archiving the current session makes\n" +
				"a new, empty one current.\n\n" +
				"  --force         drop the session's proposed changes not merged (they are lost; listed and audited)\n" +
				projectFlag + "  --json          machine-readable output\n"},
		"session new": {usage: "session new [--project DIR] [--json]", summary: "start a new, empty session and make it current",
			text: "The current session is kept as it is (not archived, its proposed changes kept); resume it with\n" +
				"`fluffy session resume ID`. Refused while a task runs.\n\n" + projectFlag + "  --json          machine-readable output\n"},
	}
	maps.Copy(topics, mcpHelp())
	return topics
}

// isHelpFlag reports whether a is one of the spellings of "help" as a flag.
func isHelpFlag(a string) bool { return a == "-h" || a == "--help" || a == "-help" }

// helpRequest finds a help flag in the arguments of a command (before a
// "--") and returns the most specific topic it asks for.
func helpRequest(args []string, topics map[string]helpTopic) (string, bool) {
	found := false
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if isHelpFlag(a) {
			found = true
			break
		}
	}
	if !found {
		return "", false
	}
	if len(args) > 1 {
		if _, ok := topics[args[0]+" "+args[1]]; ok {
			return args[0] + " " + args[1], true
		}
	}
	return args[0], true
}

// printHelp writes the help of topic path ("" is fluffy itself).
func printHelp(w io.Writer, path string) error {
	if path == "" {
		usage(w, commands())
		return nil
	}
	topics := helpTopics()
	t, ok := topics[path]
	if !ok {
		return usageErr("help", fmt.Sprintf("no help for %q", path), "run `fluffy help` for the list of commands")
	}
	fmt.Fprintf(w, "Usage: fluffy %s\n\n%s\n", t.usage, upperFirst(t.summary)+".")
	if t.text != "" {
		fmt.Fprintf(w, "\n%s", t.text)
	}
	var subs []string
	for p, st := range topics {
		if rest, ok := strings.CutPrefix(p, path+" "); ok && !strings.Contains(rest, " ") && !st.hidden {
			subs = append(subs, rest)
		}
	}
	if len(subs) > 0 {
		sort.Strings(subs)
		width := 0
		for _, s := range subs {
			width = max(width, len(s))
		}
		fmt.Fprintln(w, "\nSubcommands:")
		for _, s := range subs {
			fmt.Fprintf(w, "  %-*s  %s\n", width, s, topics[path+" "+s].summary)
		}
		fmt.Fprintf(w, "\nRun `fluffy help %s SUBCOMMAND` (or `fluffy %s SUBCOMMAND --help`) for its flags.\n", path, path)
	}
	return nil
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// runHelp implements `fluffy help [COMMAND [SUBCOMMAND]]`.
func runHelp(e *env, args []string) error {
	if len(args) > 0 && isHelpFlag(args[len(args)-1]) {
		args = args[:len(args)-1] // `fluffy help X --help` is `fluffy help X`
		if len(args) == 0 {
			args = []string{"help"}
		}
	}
	if len(args) > 2 {
		return uerr.New("USAGE", "too many arguments to `fluffy help`", "help takes a command and at most one subcommand", "run `fluffy help COMMAND [SUBCOMMAND]`")
	}
	return printHelp(e.stdout, strings.Join(args, " "))
}
