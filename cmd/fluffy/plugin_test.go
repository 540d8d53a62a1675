package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/registry"
)

func TestPluginLifecycleCLI(t *testing.T) {
	c := conformanceCLI(t) // certifies in the L2 sandbox
	src := buildPlugin(t, "../../pluginsdk/examples/wordcount", "../../pluginsdk/examples/wordcount/plugin.yaml")

	// Third-party, no TTY, no --yes: refused with an explanation, nothing stored.
	_, errOut, code := c.run("plugin", "install", src)
	if code == 0 || !strings.Contains(errOut, "REGISTRY_NOT_CONFIRMED") || !strings.Contains(errOut, "--yes") {
		t.Fatalf("install without --yes: code %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(c.home, "plugins", "wordcount")); err == nil {
		t.Fatal("refused install left files in the store")
	}
	// A TTY user who answers "n" declines; "y" installs.
	if _, errOut, code := c.runIn("n\n", true, "plugin", "install", src); code == 0 || !strings.Contains(errOut, "declined") {
		t.Fatalf("declined install: %d %s", code, errOut)
	}
	out, errOut, code := c.runIn("y\n", true, "plugin", "install", src)
	if code != 0 || !strings.Contains(out, "installed wordcount@1.0.0") || !strings.Contains(errOut, "Install this plugin?") {
		t.Fatalf("install: %d\n%s\n%s", code, out, errOut)
	}
	stored := filepath.Join(c.home, "plugins", "wordcount", "1.0.0")
	for _, f := range []string{"plugin.yaml", "wordcount"} {
		if _, err := os.Stat(filepath.Join(stored, f)); err != nil {
			t.Fatalf("store lacks %s: %v", f, err)
		}
	}

	// list --json is stable and complete.
	out, _, code = c.run("plugin", "list", "--json")
	var recs []registry.Record
	if code != 0 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) != 1 {
		t.Fatalf("list --json: %d %s", code, out)
	}
	r := recs[0]
	if r.Name != "wordcount" || r.State != registry.StateRegistered || !r.HasTag(registry.TagThirdParty) || r.Dir != stored {
		t.Fatalf("record: %+v", r)
	}
	out, _, _ = c.run("plugin", "list")
	if !strings.Contains(out, "wordcount") || !strings.Contains(out, "third_party") {
		t.Fatalf("list table: %s", out)
	}
	out, _, code = c.run("plugin", "info", "wordcount")
	if code != 0 || !strings.Contains(out, "text.count") || !strings.Contains(out, "State:         registered") {
		t.Fatalf("info: %s", out)
	}

	// disable needs a reason; then shows it; enable restores.
	if _, errOut, code := c.run("plugin", "disable", "wordcount"); code != 2 || !strings.Contains(errOut, "--reason") {
		t.Fatalf("disable without reason: %d %s", code, errOut)
	}
	if _, _, code := c.run("plugin", "disable", "wordcount", "--reason", "too chatty"); code != 0 {
		t.Fatal("disable failed")
	}
	out, _, _ = c.run("plugin", "info", "wordcount")
	if !strings.Contains(out, "disabled") || !strings.Contains(out, "too chatty") {
		t.Fatalf("info after disable: %s", out)
	}
	if _, _, code := c.run("plugin", "enable", "wordcount"); code != 0 {
		t.Fatal("enable failed")
	}
	out, _, _ = c.run("plugin", "list")
	if !strings.Contains(out, "registered") {
		t.Fatalf("list after enable: %s", out)
	}

	// Same version again: refused without --force.
	if _, errOut, code := c.run("plugin", "install", src, "--yes"); code == 0 || !strings.Contains(errOut, "REGISTRY_ALREADY_INSTALLED") {
		t.Fatalf("reinstall: %d %s", code, errOut)
	}

	// remove NAME@VERSION deletes files and record.
	out, _, code = c.run("plugin", "remove", "wordcount@1.0.0")
	if code != 0 || !strings.Contains(out, "removed wordcount@1.0.0") {
		t.Fatalf("remove: %d %s", code, out)
	}
	if _, err := os.Stat(stored); !os.IsNotExist(err) {
		t.Fatal("remove left the plugin directory")
	}
	out, _, _ = c.run("plugin", "list", "--json")
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after remove: %s", out)
	}
	if _, errOut, code := c.run("plugin", "info", "wordcount"); code != 1 || !strings.Contains(errOut, "REGISTRY_NOT_FOUND") {
		t.Fatalf("info after remove: %d %s", code, errOut)
	}
}

func TestPluginInstallRejectsBrokenManifest(t *testing.T) {
	c := conformanceCLI(t) // certifies in the L2 sandbox
	src := buildPlugin(t, "../../pluginsdk/examples/wordcount", "../../pluginsdk/examples/wordcount/plugin.yaml")
	man := filepath.Join(src, "plugin.yaml")
	b, _ := os.ReadFile(man)
	os.WriteFile(man, []byte(strings.Replace(string(b), "kind: tool", "kind: tool\ncolour: blue", 1)), 0o644)
	_, errOut, code := c.run("plugin", "install", src, "--yes")
	if code != 1 || !strings.Contains(errOut, "colour") {
		t.Fatalf("broken install: %d %s", code, errOut)
	}
	out, _, _ := c.run("plugin", "list", "--rejected", "--json")
	var recs []registry.Record
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 1 {
		t.Fatalf("rejected list: %s", out)
	}
	if recs[0].State != registry.StateRejected || recs[0].ManifestPath != man || !strings.Contains(recs[0].Reason, "colour") || recs[0].ErrorCode == "" {
		t.Fatalf("rejected record: %+v", recs[0])
	}
	out, _, _ = c.run("plugin", "list", "--rejected")
	if !strings.Contains(out, "colour") {
		t.Fatalf("rejected table: %s", out)
	}
}

func TestPluginDowngradeAndChecksum(t *testing.T) {
	c := conformanceCLI(t) // certifies in the L2 sandbox
	src := buildPlugin(t, "../../pluginsdk/examples/wordcount", "../../pluginsdk/examples/wordcount/plugin.yaml")
	if _, errOut, code := c.run("plugin", "install", src, "--yes"); code != 0 {
		t.Fatal(errOut)
	}
	man := filepath.Join(src, "plugin.yaml")
	b, _ := os.ReadFile(man)
	os.WriteFile(man, []byte(strings.Replace(string(b), "version: 1.0.0", "version: 0.9.0", 1)), 0o644)
	if _, errOut, code := c.run("plugin", "install", src, "--yes"); code == 0 || !strings.Contains(errOut, "REGISTRY_DOWNGRADE") {
		t.Fatalf("downgrade: %d %s", code, errOut)
	}
	if _, errOut, code := c.run("plugin", "install", src, "--yes", "--force"); code != 0 {
		t.Fatalf("forced downgrade: %s", errOut)
	}
	// Tamper with the binary: the checksum check refuses it.
	f, _ := os.OpenFile(filepath.Join(src, "wordcount"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("tampered"))
	f.Close()
	os.WriteFile(man, []byte(strings.Replace(string(b), "version: 1.0.0", "version: 2.0.0", 1)), 0o644)
	if _, errOut, code := c.run("plugin", "install", src, "--yes"); code == 0 || !strings.Contains(errOut, "CHECKSUM") {
		t.Fatalf("tampered: %d %s", code, errOut)
	}
}

func TestThirdPartyCannotClaimCore(t *testing.T) {
	c := conformanceCLI(t) // certifies in the L2 sandbox
	src := buildPlugin(t, "../../pluginsdk/examples/wordcount", "../../pluginsdk/examples/wordcount/plugin.yaml")
	man := filepath.Join(src, "plugin.yaml")
	b, _ := os.ReadFile(man)
	os.WriteFile(man, []byte(strings.Replace(string(b), "tags: [third_party]", "tags: [core_plugin]", 1)), 0o644)
	// Claiming core_plugin does not skip the approval step.
	if _, errOut, code := c.run("plugin", "install", src); code == 0 || !strings.Contains(errOut, "REGISTRY_NOT_CONFIRMED") {
		t.Fatalf("core claim from outside builtin dir: %d %s", code, errOut)
	}
	// From a builtin directory it is trusted as core.
	c.vars["FLUFFY_BUILTIN_PLUGINS"] = filepath.Dir(src)
	out, errOut, code := c.run("plugin", "install", src, "--json")
	if code != 0 {
		t.Fatal(errOut)
	}
	if !strings.Contains(out, `"core_plugin"`) || strings.Contains(out, "third_party") {
		t.Fatalf("builtin core plugin tags: %s", out)
	}
}
