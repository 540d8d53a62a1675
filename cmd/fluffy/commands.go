package main

// commandTree is every command of fluffy, each defined once: its arguments,
// its help text, the function that declares its flags (beside its
// implementation, in the file named after it) and its subcommands. The
// root is `fluffy [flags] [TASK...]` itself.
func commandTree() *cmd {
	initCmd := &cmd{name: "init", short: "set fluffy up for this project: detect it, pick a provider, write .fluffy/config.yaml",
		long: "Says what fluffy sees in the project (Go go.mod, Python pyproject.toml/setup.py/pytest.ini/setup.cfg,\n" +
			"Node package.json, Rust Cargo.toml, and the test runner of each), what the active policy lets the AI\n" +
			"write and why, and what each provider needs; then asks for a provider and a model and writes\n" +
			"<project>/.fluffy/config.yaml. Without a terminal, or with --yes, it asks nothing: --provider is\n" +
			"then required. The API key is never written: it stays in OPENAI_API_KEY / ANTHROPIC_API_KEY (or a\n" +
			"key file named by providers.NAME.api_key_file). `fluffy config init` is the same command.\n",
		flags: runInitFlags}
	configInit := *initCmd
	configInit.short = "the same as `fluffy init`"
	configInit.long = "`fluffy config init` is another name of `fluffy init`: the same flags, the same file (the project's\n" +
		".fluffy/config.yaml; --user for $FLUFFY_HOME/config.yaml).\n"
	kernelRunCmd := &cmd{name: "run", hidden: true, short: "run the project's kernel in the foreground", flags: kernelRunFlags}

	return &cmd{name: "fluffy", args: "[TASK...]", flags: rootFlags, subs: []*cmd{
		{name: "help", args: "[COMMAND [SUBCOMMAND]]", short: "show the help of fluffy or of one command",
			long: "The same text as `fluffy COMMAND [SUBCOMMAND] --help` or `-h`.\n", flags: helpFlags},
		{name: "version", short: "print fluffy's version and the plugin API versions it speaks",
			long: "Prints fluffy's version and the range of plugin API versions this fluffy speaks\n" +
				"(a plugin's plugin.yaml api_versions must include one of them).\n", flags: runVersionFlags},
		{name: "attach", short: "follow the project's running task",
			long: "Follows the task the project's kernel is running (after the terminal that started it left).\n", flags: runAttachFlags},
		initCmd,

		{name: "audit", short: "inspect, verify, export the project's audit log", subs: []*cmd{
			{name: "log", short: "show audit records, newest last", flags: auditLogFlags},
			{name: "verify", short: "check the audit log's hash chain", flags: auditVerifyFlags},
			{name: "export", short: "write the audit log as JSON lines", flags: auditExportFlags},
			{name: "stats", short: "count audit records by type", flags: auditStatsFlags},
		}},

		{name: "prompt", short: "show the system prompt the model reads next (workflow, project brief, tools)", subs: []*cmd{
			{name: "show", short: "print the system prompt of the session's next model request",
				long: "Prints what the model reads before the next task: the workflow state and what is writable, the\n" +
					"project's brief (languages, the top of the file tree, the branch) and its instructions (AGENTS.md,\n" +
					"or CLAUDE.md, at the root and on the way to the files the session touched), the tools. Starts the\n" +
					"project's kernel if it is not running. The REPL's /prompt prints the same.\n", flags: promptShowFlags},
		}},

		{name: "config", short: "init, get, set and show settings (flags > FLUFFY_* > project > user > defaults)", subs: []*cmd{
			&configInit,
			{name: "get", args: "KEY", short: "print one setting's effective value", long: "Keys: see `fluffy config show --all`.\n", flags: configGetFlags},
			{name: "set", args: "KEY VALUE", short: "change one setting", flags: configSetFlags},
			{name: "show", short: "print the effective settings and where each comes from", flags: configShowFlags},
		}},

		{name: "conformance", short: "list the conformance catalogue; run it on a plugin (JSON/JUnit reports)", subs: []*cmd{
			{name: "list", short: "list the conformance items", flags: conformanceListFlags,
				forms: []string{"[--profile P] [--json]", "--markdown"}},
			{name: "run", args: "PATH", short: "certify the plugin in PATH (a directory with plugin.yaml)", flags: conformanceRunFlags},
			{name: "stub-kernel", hidden: true, rawArgs: true, short: "internal: the throwaway kernel a conformance item kills", flags: stubKernelFlags},
		}},

		{name: "kernel", short: "run the project's kernel process (normally started for you); status, stop",
			long: "Without a subcommand (or with run): runs the project's kernel in the foreground. fluffy\n" +
				"normally starts it for you (in its L1 container, or as a local process with --l1 none).\n",
			flags: kernelRunFlags, subs: []*cmd{
				kernelRunCmd,
				{name: "status", short: "is the project's kernel running, and what is it doing", flags: kernelStatusFlags},
				{name: "stop", short: "stop the project's kernel", flags: kernelStopFlags},
			}},

		{name: "plugin", short: "install, list, inspect, enable, disable and remove plugins; write your own", subs: []*cmd{
			{name: "install", args: "PATH", short: "install the plugin in PATH (a directory with plugin.yaml) after you approved it",
				long: "Validates the manifest and the binary's sha256, shows what the plugin asks for and asks you\n" +
					"(on a terminal); only then runs certification (the conformance profile of its kind) and copies\n" +
					"it into $FLUFFY_HOME/plugins. Without a terminal, pass --yes after reviewing the plugin.\n", flags: pluginInstallFlags},
			{name: "list", short: "list installed and builtin plugins",
				long: "Lists every plugin version the registry in $FLUFFY_HOME knows, fluffy's builtin plugins\n" +
					"included (they are registered before listing).\n\n" +
					"STATE is what the registry records for that version, never whether a process runs now:\n" +
					"  registered  usable: a kernel starts it in its sandbox on first use\n" +
					"  disabled    you disabled it (`fluffy plugin enable NAME` to use it again)\n" +
					"  rejected    a kernel refused to load it; `fluffy plugin info NAME` says why\n" +
					"CERTIFIED is the recorded conformance verdict for this version's sha256.\n", flags: pluginListFlags},
			{name: "info", args: "NAME", short: "show one plugin: manifest, tags, integrity, certification", flags: pluginInfoFlags},
			{name: "remove", args: "NAME[@VERSION]", short: "remove a plugin (every version, or one)", flags: pluginRemoveFlags},
			{name: "enable", args: "NAME", short: "enable a disabled plugin", flags: pluginEnableFlags},
			{name: "disable", args: "NAME", required: []string{"reason"}, short: "disable a plugin; kernels stop loading it", flags: pluginDisableFlags},
			{name: "call", args: "PLUGIN TOOL [ARGS_JSON]", short: "run one tool of a plugin by hand (through policy, in its sandbox)",
				long: "Runs TOOL of PLUGIN with ARGS_JSON (default {}) the way the AI would: arguments checked against\n" +
					"the tool's schema, policy, the plugin's L2 sandbox; writes only reach the output directory.\n", flags: pluginCallFlags},
			{name: "grant", args: "NAME TAG", short: "grant a tag the plugin requested (e.g. trusted_write); recorded and audited", flags: pluginGrantFlags},
			{name: "revoke", args: "NAME TAG", short: "revoke a granted tag", flags: pluginRevokeFlags},
			{name: "new", args: "NAME", short: "create a tool plugin project from the template",
				long: "Writes DIR (default ./NAME): main.go (one tool on the SDK), main_test.go (the SDK's test kit),\n" +
					"plugin.yaml, go.mod and a Makefile whose `make` builds a static binary (CGO_ENABLED=0) and\n" +
					"stamps its sha256 into plugin.yaml (`fluffy plugin stamp`). Fields: docs/plugin-yaml.md.\n", flags: pluginNewFlags},
			{name: "dev", args: "DIR", short: "rebuild, stamp and reinstall the plugin you are writing in DIR",
				long: "Builds the Go package in DIR into the manifest's entry (CGO_ENABLED=0), stamps its sha256,\n" +
					"then installs it as `plugin install` does (your approval of this binary, certification in\n" +
					"its sandbox), replacing the installed copy of the same version. Kernels start plugins when\n" +
					"first used: the next `plugin call` or session runs the new build; a kernel already running\n" +
					"keeps the instance it started.\n", flags: pluginDevFlags},
			{name: "stamp", args: "DIR", short: "write the entry binary's sha256 into DIR/plugin.yaml",
				long: "Checks that the entry binary can run in the empty sandbox image (statically linked), then\n" +
					"writes its sha256 into plugin.yaml, keeping the rest of the file as it is.\n", flags: pluginStampFlags},
		}},

		{name: "policy", short: "show, validate, explain, update and trust the security policy", subs: []*cmd{
			{name: "show", short: "print the active policy",
				long: "The active policy is <project>/.fluffy/policy.yaml once you trusted its content (`fluffy policy\n" +
					"trust`, or written by `fluffy policy update`), else the built-in default.\n", flags: policyShowFlags},
			{name: "validate", args: "FILE", short: "check a policy file (rules, examples, counter-examples)", flags: policyValidateFlags},
			{name: "explain", required: []string{"syscall"}, short: "show the decision and the rules behind it for one request, and which files count as tests", flags: policyExplainFlags},
			{name: "update", args: "FILE", short: "replace the project's policy after review (diff, trial replay of recent audit entries)",
				long: "The content written is trusted (pinned by sha256 in $FLUFFY_HOME/trust/policies).\n", flags: policyUpdateFlags},
			{name: "trust", short: "review the project's policy file and trust it (a clone's, or one edited by hand)",
				long: "A project's .fluffy/policy.yaml applies only once you trusted its exact content: a cloned\n" +
					"repository can ship any policy (mode: observe, an allow-everything rule). Until then, and\n" +
					"after any change not made through `fluffy policy update`, the embedded default applies and\n" +
					"fluffy says so (kernel log, audit log, policy show/explain, the REPL banner and /status, a\n" +
					"one-shot task's stderr). This command shows the file's changes against the version you\n" +
					"trusted last (or the embedded default), asks, and pins its sha256 in\n" +
					"$FLUFFY_HOME/trust/policies; a running kernel applies it within a second.\n", flags: policyTrustFlags},
		}},

		{name: "sandbox", short: "list (ls) and clean up (gc) plugin sandbox containers", subs: []*cmd{
			{name: "ls", short: "list this home's sandbox containers and volumes", flags: sandboxLsFlags},
			{name: "gc", short: "remove this home's orphaned sandboxes", flags: sandboxGCFlags},
		}},

		{name: "session", short: "list, show, resume, archive or start this project's sessions",
			long: "A project has sessions; its kernel serves the current one: workflow state and mode, proposed\n" +
				"changes, workflow history and the conversation with the model (pins included), all kept in the\n" +
				"project's database. Switching sessions (new, resume, archiving the current one) makes the kernel\n" +
				"exit after answering; the next command starts it on the new current session.\n", subs: []*cmd{
				{name: "list", short: "list the project's sessions",
					long: "One line per session, archived ones included: id, last use, mode, state, proposed changes not\n" +
						"merged, title (its first task); * marks the current one.\n", flags: sessionFlags(false, sessionList)},
				{name: "show", args: "[ID]", short: "show one session (default: the current one)",
					long: "Prints a session as JSON: its summary, workflow history and conversation (and, for the current\n" +
						"one, its live status).\n", flags: sessionFlags(false, sessionShow)},
				{name: "resume", args: "ID", short: "make a session current again",
					long: "Makes session ID the current one (un-archiving it) with its state, mode, proposed changes,\n" +
						"history and conversation. Refused while a task runs.\n", flags: sessionFlags(false, sessionResume)},
				{name: "archive", args: "[ID]", short: "put a session away (default: the current one)",
					long: "Marks the session archived (`session resume` brings it back). Refused while a task runs, and while\n" +
						"the session has proposed changes not merged unless --force. Archiving the current session makes\n" +
						"a new, empty one current.\n", flags: sessionFlags(true, sessionArchive)},
				{name: "new", short: "start a new, empty session and make it current",
					long: "The current session is kept as it is (not archived, its proposed changes kept); resume it with\n" +
						"`fluffy session resume ID`. Refused while a task runs.\n", flags: sessionFlags(false, sessionNew)},
			}},

		mcpCmd(),
		completionCmd(),
	}}
}
