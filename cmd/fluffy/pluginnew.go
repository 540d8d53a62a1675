package main

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/sandboxadmin"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
)

// SourceDir is the fluffy checkout this binary was built from (set by `make
// build`): the default SDK location of `fluffy plugin new`.
var SourceDir = ""

//go:embed plugintemplate/*.tmpl
var pluginTemplate embed.FS

// pluginNew implements `fluffy plugin new NAME`: a tool plugin project that
// builds, tests, stamps and installs as generated.
func pluginNewFlags(e *env, fs *flag.FlagSet) func([]string) error {
	dir := fs.String("dir", "", "`DIR` where to write (must not exist or be empty; default ./NAME)")
	module := fs.String("module", "", "`PATH` the Go module path (default example.com/NAME)")
	sdk := fs.String("sdk", "", "`DIR` a fluffy source checkout for go.mod's replace directive (default: the checkout\nthis fluffy was built from, if it still exists)")
	return func(pos []string) error { return pluginNew(e, pos, dir, module, sdk) }
}

func pluginNew(e *env, pos []string, dir, module, sdk *string) error {
	name := pos[0]
	if err := manifests.CheckName(name); err != nil {
		return err
	}
	if *dir == "" {
		*dir = name
	}
	if *module == "" {
		*module = "example.com/" + name
	}
	sdkDir, err := findSDK(*sdk)
	if err != nil {
		return err
	}
	out, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if ents, err := os.ReadDir(out); err == nil && len(ents) > 0 {
		return uerr.New("PLUGIN_NEW_EXISTS", fmt.Sprintf("%s exists and is not empty", out),
			"plugin new writes a fresh project and never overwrites files", "pass --dir with a new directory")
	}
	self, err := os.Executable()
	if err != nil {
		self = "fluffy"
	}
	vs := make([]string, 0, 2)
	for _, v := range base.SupportedAPIVersions() {
		vs = append(vs, fmt.Sprint(v))
	}
	data := map[string]string{
		"Name": name, "Tool": strings.ReplaceAll(name, "-", "_") + ".lines", "Module": *module, "SDK": sdkDir,
		"Fluffy": self, "Author": envOr(e.getenv, "USER", "you"), "APIVersions": strings.Join(vs, ", "),
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	files := map[string]string{"main.go.tmpl": "main.go", "main_test.go.tmpl": "main_test.go", "plugin.yaml.tmpl": "plugin.yaml", "Makefile.tmpl": "Makefile", "go.mod.tmpl": "go.mod"}
	for src, dst := range files {
		// <% %>: Go composite literals are full of {{.
		t, err := template.New(src).Delims("<%", "%>").ParseFS(pluginTemplate, "plugintemplate/"+src)
		if err != nil {
			return fmt.Errorf("plugin template %s: %w", src, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return fmt.Errorf("plugin template %s: %w", src, err)
		}
		if err := os.WriteFile(filepath.Join(out, dst), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", dst, err)
		}
	}
	fmt.Fprintf(e.stdout, "created %s in %s (SDK: %s)\nnext: cd %s && make test && make && make install\n", name, out, sdkDir, *dir)
	return nil
}

// findSDK returns the fluffy checkout go.mod's replace directive points at:
// --sdk, else the checkout this binary was built from.
func findSDK(flagDir string) (string, error) {
	d := flagDir
	if d == "" {
		d = SourceDir
	}
	if d == "" {
		return "", uerr.New("PLUGIN_NEW_NO_SDK", "cannot tell where fluffy's source (the plugin SDK) is",
			"the SDK module github.com/fluffy-waffle/fluffy is not on a module proxy, and this fluffy was not built by `make build` in a checkout",
			"pass --sdk with the path of a fluffy source checkout")
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", err
	}
	mod, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil || !bytes.Contains(mod, []byte("module github.com/fluffy-waffle/fluffy\n")) {
		return "", uerr.New("PLUGIN_NEW_NO_SDK", fmt.Sprintf("%s is not a fluffy source checkout", abs),
			"its go.mod does not declare module github.com/fluffy-waffle/fluffy", "pass --sdk with the path of a fluffy source checkout")
	}
	return abs, nil
}

// pluginStamp implements `fluffy plugin stamp DIR`: check that the entry
// binary can run in the sandbox, then write its sha256 into plugin.yaml.
func pluginStampFlags(e *env, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error { return pluginStamp(e, args) }
}

func pluginStamp(e *env, args []string) error {
	path := filepath.Join(args[0], manifests.FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		return uerr.Wrap(err, manifests.CodeReadFailed, "cannot read "+path, err.Error(), "pass the directory that holds plugin.yaml")
	}
	// Stamp a placeholder first, so a fresh manifest (sha256: "") parses.
	const zero = "0000000000000000000000000000000000000000000000000000000000000000"
	tmp, err := manifests.StampSHA256(data, zero)
	if err != nil {
		return err
	}
	m, err := manifests.Parse(path, tmp)
	if err != nil {
		return err
	}
	if m.Sandbox.Template != "" && m.Sandbox.Template != manifests.TemplateNone {
		if err := sandboxadmin.CheckELF(m.Name, m.EntryPath()); err != nil {
			return err
		}
	}
	sum, err := manifests.FileSHA256(m.EntryPath())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return uerr.Wrap(err, manifests.CodeEntryMissing, "no entry binary "+m.EntryPath(), err.Error(), "build it first: CGO_ENABLED=0 go build -o "+m.Entry+" .")
		}
		return err
	}
	stamped, err := manifests.StampSHA256(data, sum)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, stamped, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	m, err = manifests.Load(path)
	if err == nil {
		err = m.VerifyChecksum()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "stamped %s: sha256 %s\n", path, sum)
	return nil
}

// pluginDev implements `fluffy plugin dev DIR`: the author's loop in one
// step — a static build of the Go package in DIR into the manifest's entry,
// stamp, then the same install as `plugin install` (your approval of this
// binary, certification in its sandbox), replacing the installed copy of
// the same version. The next kernel that starts the plugin runs it.
func pluginDevFlags(e *env, fs *flag.FlagSet) func([]string) error {
	yes := fs.Bool("yes", false, "approve the rebuilt plugin without asking (grants no tag)")
	sb := sandboxFlag(e, fs)
	var grant stringList
	fs.Var(&grant, "grant", "`TAG` grant a tag the plugin requests (a comma list, or repeated)")
	return func(pos []string) error { return pluginDev(e, pos, yes, sb, grant) }
}

func pluginDev(e *env, pos []string, yes *bool, sb *string, grant stringList) error {
	dir := pos[0]
	path := filepath.Join(dir, manifests.FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		return uerr.Wrap(err, manifests.CodeReadFailed, "cannot read "+path, err.Error(), "pass the directory that holds plugin.yaml and the plugin's main package")
	}
	tmp, err := manifests.StampSHA256(data, strings.Repeat("0", 64))
	if err != nil {
		return err
	}
	m, err := manifests.Parse(path, tmp)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "  building %s (CGO_ENABLED=0)...\n", m.Entry)
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.FromSlash(m.Entry), ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return uerr.Wrap(err, "PLUGIN_BUILD_FAILED", "go build of "+dir+" failed", strings.TrimSpace(string(out)), "fix the build errors above and run `fluffy plugin dev` again")
	}
	if err := pluginStamp(e, []string{dir}); err != nil {
		return err
	}
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		return err
	}
	defer closeFn()
	opts := registry.InstallOptions{
		Reinstall: true, Yes: *yes, Grant: grant, BuiltinDirs: builtinPluginDirs(e),
		Progress:  func(s string) { fmt.Fprintf(e.stderr, "  %s...\n", s) },
		Certifier: newCertifier(e, *sb),
	}
	if e.isTTY {
		in := bufio.NewReader(e.stdin)
		opts.Confirm = func(c registry.Consent) (registry.Approval, error) { return confirmInstall(e, in, c, dir) }
	}
	rec, err := reg.Install(context.Background(), dir, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "installed %s@%s from %s (sha256 %s); the next kernel that starts it runs this build\n", rec.Name, rec.Version, dir, rec.SHA256)
	return nil
}
