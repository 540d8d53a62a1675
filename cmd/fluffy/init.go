package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/host/policyverbs"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// projectLang is one language fluffy recognised in a project, with the
// test runner test.run uses for it (the same markers as tool-test's
// runner detection).
type projectLang struct {
	name, marker, runner string
	// source, test and manifest are sample paths the policy is asked
	// about, in this language's layout.
	source, test, manifest string
}

var knownLangs = []projectLang{
	{"Go", "go.mod", "go test", "main.go", "main_test.go", "go.mod"},
	{"Python", "pyproject.toml", "pytest", "app.py", "test_app.py", "pyproject.toml"},
	{"Python", "setup.py", "pytest", "app.py", "test_app.py", "setup.py"},
	{"Python", "pytest.ini", "pytest", "app.py", "test_app.py", "pytest.ini"},
	{"Python", "setup.cfg", "pytest", "app.py", "test_app.py", "setup.cfg"},
	{"Node", "package.json", "node --test", "index.js", "index.test.js", "package.json"},
	{"Rust", "Cargo.toml", "cargo test", "src/lib.rs", "tests/lib_test.rs", "Cargo.toml"},
}

// detectProject lists the languages whose marker file is at the project's
// root, one entry per language.
func detectProject(dir string) []projectLang {
	var out []projectLang
	for _, l := range knownLangs {
		if slices.ContainsFunc(out, func(o projectLang) bool { return o.name == l.name }) {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(dir, l.marker)); err == nil && fi.Mode().IsRegular() {
			out = append(out, l)
		}
	}
	return out
}

// langLine says in one line what was detected.
func langLine(langs []projectLang) string {
	if len(langs) == 0 {
		return "no go.mod, pyproject.toml, setup.py, package.json or Cargo.toml at the root: test.run finds no runner until one is there"
	}
	var parts []string
	for _, l := range langs {
		parts = append(parts, fmt.Sprintf("%s (%s; tests run with %s)", l.name, l.marker, l.runner))
	}
	return strings.Join(parts, ", ")
}

// writeVerdict names what the active policy decided for an AI write of a
// path, with the first reason.
func writeVerdict(res policyverbs.Result) (string, string) {
	why := ""
	if len(res.Reasons) > 0 {
		why = res.Reasons[0]
	} else if len(res.Deciding) > 0 {
		why = res.Deciding[0].Reason
		if why == "" {
			why = "rule " + res.Deciding[0].Rule
		}
	}
	switch res.Decision {
	case policyverbs.Allow:
		return "writable", why
	case policyverbs.RequireReview:
		return "after your review", why
	}
	return "never", why
}

// writesLines says what the AI may write in this project and why, from the
// project's active policy, for paths in the detected language's layout.
func writesLines(e *env, project string, langs []projectLang) []string {
	l := projectLang{source: "main.go", test: "main_test.go", manifest: "go.mod"}
	if len(langs) > 0 {
		l = langs[0]
	}
	src, test := projectSamples(project, l)
	paths := []string{src, test, l.manifest, ".env"}
	p, results, err := policyverbs.New(e.home, e.log).AIWrites(context.Background(), project, paths)
	if err != nil {
		return []string{"the policy does not load: " + safeLine(uerr.From(err).What, 200)}
	}
	out := []string{fmt.Sprintf("policy %s:", safeLine(p.File, 200))}
	for i, path := range paths {
		v, why := writeVerdict(results[i])
		out = append(out, fmt.Sprintf("  %-18s %s — %s", path, v, safeLine(orDash(why), 160)))
	}
	out = append(out, "in strict mode (the default) a task writes a failing test first, then the code until the tests pass;",
		"every write lands in the session's changeset and reaches the project only through a merge")
	return out
}

// isTestFile says whether a file name is a test in language l's usual
// layout (the file, not its directory, for every language but Rust).
func (l projectLang) isTestFile(rel string) bool {
	base := filepath.Base(rel)
	switch l.name {
	case "Go":
		return strings.HasSuffix(base, "_test.go")
	case "Python":
		return strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py")
	case "Node":
		return strings.Contains(base, ".test.") || strings.Contains(base, ".spec.")
	case "Rust":
		return strings.HasPrefix(filepath.ToSlash(rel), "tests/")
	}
	return false
}

// sourceExts are the extensions of language l's source files.
func (l projectLang) sourceExts() []string {
	switch l.name {
	case "Go":
		return []string{".go"}
	case "Python":
		return []string{".py"}
	case "Node":
		return []string{".js", ".mjs", ".cjs", ".ts"}
	case "Rust":
		return []string{".rs"}
	}
	return nil
}

// projectSamples picks one source and one test file of the project itself
// (the first in walk order) so the user reads the verdict on their own
// files; the language's sample names stand in for what is not there. The
// walk is bounded and skips hidden, vendored and build directories.
func projectSamples(project string, l projectLang) (source, test string) {
	const maxEntries = 5000
	seen := 0
	_ = filepath.WalkDir(project, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if seen++; seen > maxEntries || (source != "" && test != "") {
			return filepath.SkipAll
		}
		rel, rerr := filepath.Rel(project, path)
		if rerr != nil || rel == "." {
			return nil
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case strings.HasPrefix(name, "."), name == "node_modules", name == "vendor", name == "target", name == "venv", name == "__pycache__", name == "dist", name == "build":
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !slices.Contains(l.sourceExts(), filepath.Ext(rel)) {
			return nil
		}
		if l.isTestFile(rel) {
			if test == "" {
				test = rel
			}
		} else if base := filepath.Base(rel); source == "" && base != "__init__.py" && base != "conftest.py" && base != "setup.py" {
			source = rel
		}
		return nil
	})
	if source == "" {
		source = l.source
	}
	if test == "" {
		test = l.test
	}
	return filepath.ToSlash(source), filepath.ToSlash(test)
}

// firstRunGuide is what a newcomer with nothing configured reads: the
// project as fluffy sees it, what the AI may write, and the providers.
// next adds how to go on (not for init itself, which goes on by asking).
func firstRunGuide(w io.Writer, e *env, project string, next bool) {
	langs := detectProject(project)
	fmt.Fprintf(w, "fluffy is not set up for %s yet.\n", safeLine(project, 200))
	fmt.Fprintf(w, "  project: %s\n", langLine(langs))
	for _, l := range writesLines(e, project, langs) {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintln(w, "  providers:")
	for _, c := range providerChoices() {
		fmt.Fprintf(w, "    %s\n", c)
	}
	if next {
		fmt.Fprintln(w, "  next: `fluffy init` (asks, then writes .fluffy/config.yaml), `fluffy init --provider openai --yes`, or --provider NAME on the task")
	}
}

// bannerLines are the REPL's two first-run lines.
func bannerLines(project string) [2]string {
	return [2]string{
		"new here: " + langLine(detectProject(project)) + "; strict mode: a failing test first, then the code (/status says what is writable and why)",
		"no provider yet: openai (OPENAI_API_KEY), anthropic (ANTHROPIC_API_KEY), ollama (local, no key), replay (cassette); run `fluffy init`, or /provider NAME",
	}
}

// runInit implements `fluffy init` (and its alias `fluffy config init`):
// it shows the first-run guide, asks for a provider and model (or takes
// them from flags) and writes the project's .fluffy/config.yaml.
func runInitFlags(e *env, fs *flag.FlagSet) func([]string) error {
	provider := fs.String("provider", "", "`openai|anthropic|ollama|replay` the provider (asked on a terminal when not given)")
	model := fs.String("model", "", "`NAME` the model (default: the provider's, e.g. gpt-4.1)")
	cassette := fs.String("cassette", "", "`FILE` replay: the cassette to play (stored as an absolute path)")
	project := projectDirFlag(fs)
	user := fs.Bool("user", false, "write the user's $FLUFFY_HOME/config.yaml instead of the project's")
	yes := fs.Bool("yes", false, "write without asking")
	force := fs.Bool("force", false, "replace an existing file")
	return func([]string) error {
		return runInit(e, "usage: "+synopsisOf("fluffy init", &cmd{}, fs), provider, model, cassette, project, user, yes, force)
	}
}

func runInit(e *env, usage string, provider, model, cassette, project *string, user, yes, force *bool) error {
	dir, err := existingDir(*project)
	if err != nil {
		return err
	}
	path := config.ProjectFile(dir)
	if *user {
		path = config.UserFile(e.home)
	}
	if *provider != "" && !slices.Contains(config.ProviderNames(), *provider) {
		return usageErr("init", fmt.Sprintf("unknown provider %q", safeLine(*provider, 40)), "name one of: "+strings.Join(config.ProviderNames(), ", "))
	}
	if _, err := os.Stat(path); err == nil && !*force {
		return uerr.New("CONFIG_EXISTS", path+" already exists", "init writes a fresh file", "change it with `fluffy config set KEY VALUE`, or pass --force to replace it")
	}
	asking := !*yes && e.isTTY
	if *provider == "" && !asking {
		return usageErr("init", "--provider is required without a terminal", usage)
	}
	var in *bufio.Reader
	ask := func(q, def string) (string, error) {
		if in == nil {
			in = bufio.NewReader(e.stdin)
		}
		fmt.Fprintf(e.stdout, "%s [%s]: ", q, def)
		line, err := in.ReadString('\n')
		if err != nil && line == "" {
			return "", uerr.New("INIT_ABORTED", "no answer", "the input ended before init had its answers", "run `fluffy init --provider NAME --yes` instead")
		}
		if line = strings.TrimSpace(line); line != "" {
			return line, nil
		}
		return def, nil
	}
	if asking {
		firstRunGuide(e.stdout, e, dir, false)
	}
	if *provider == "" {
		if *provider, err = ask("provider (openai, anthropic, ollama, replay)", "openai"); err != nil {
			return err
		}
	}
	if !slices.Contains(config.ProviderNames(), *provider) {
		return usageErr("init", fmt.Sprintf("unknown provider %q", safeLine(*provider, 40)), "name one of: "+strings.Join(config.ProviderNames(), ", "))
	}
	if *provider == "replay" && *cassette == "" && asking {
		if *cassette, err = ask("cassette file", ""); err != nil {
			return err
		}
	}
	if *provider != "replay" && *model == "" && asking {
		if *model, err = ask("model", defaultModelOf(*provider)); err != nil {
			return err
		}
	}
	if asking {
		ok, err := ask("write "+path+"? (y/n)", "y")
		if err != nil {
			return err
		}
		if ok != "y" && ok != "yes" {
			fmt.Fprintln(e.stdout, "nothing written")
			return nil
		}
	}
	if !asking {
		// Scripted, the guide's findings still come first: what fluffy
		// sees and what the AI may write.
		langs := detectProject(dir)
		fmt.Fprintf(e.stdout, "project: %s\n", langLine(langs))
		for _, l := range writesLines(e, dir, langs) {
			fmt.Fprintf(e.stdout, "  %s\n", l)
		}
	}
	if err := writeInit(path, *provider, *model, *cassette, *force); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s: provider %s", path, *provider)
	if m := orDefault(*model, defaultModelOf(*provider)); m != "" && *provider != "replay" {
		fmt.Fprintf(e.stdout, ", model %s", m)
	}
	fmt.Fprintln(e.stdout)
	if *provider != "replay" || *cassette == "" {
		fmt.Fprintln(e.stdout, config.KeyInstructions(*provider))
	}
	if v := kernelapi.KeyVar(*provider); v != "" && e.getenv(v) == "" {
		fmt.Fprintf(e.stdout, "%s is not set in this shell yet: a task says so before sending anything.\n", v)
	}
	fmt.Fprintln(e.stdout, `then: fluffy "describe the change"   (or fluffy for the interactive shell)`)
	return nil
}

// writeInit writes the config file for provider, with model and cassette
// when given; the file is validated before it replaces anything.
func writeInit(path, provider, model, cassette string, force bool) error {
	if cassette != "" {
		abs, err := filepath.Abs(cassette)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return uerr.Wrap(err, "CONFIG_INVALID", "cannot read the cassette "+abs, err.Error(), "name an existing cassette file (examples/cassettes/*.jsonl)")
		}
		cassette = abs
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := config.InitProvider(path, provider, force); err != nil {
		return err
	}
	if model != "" && provider != "replay" {
		if err := config.Set(path, "providers."+provider+".model", model); err != nil {
			return err
		}
	}
	if cassette != "" && provider == "replay" {
		return config.Set(path, "providers.replay.cassette", cassette)
	}
	return nil
}

func defaultModelOf(provider string) string {
	k, err := config.Lookup("providers." + provider + ".model")
	if err != nil {
		return ""
	}
	return k.Default
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
