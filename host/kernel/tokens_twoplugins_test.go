package kernel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/callbacks"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// Two plugins running side by side under one kernel cannot use each
// other's capability tokens: each token is bound to the instance (and
// process) it was issued to, and a token handed from one plugin to the
// other reads nothing, in either direction, while both keep running.
func TestTwoPluginsCannotUseEachOthersTokens(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("A"), 0o644)
	bin := filepath.Join(t.TempDir(), "fixture")
	testbin.Into(t, "internal/fixtures/tool-misbehave", bin)
	sum, _ := manifests.FileSHA256(bin)
	ctx := context.Background()
	k, err := Open(ctx, Options{Home: t.TempDir(), Workspace: ws, Sandbox: SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	names := []string{"fixture-a", "fixture-b"}
	for _, name := range names {
		dir := t.TempDir()
		data, _ := os.ReadFile(bin)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
		m, _ := manifests.StampSHA256([]byte(strings.NewReplacer("name: fixture\n", "name: "+name+"\n", "entry: fixture\n", "entry: "+name+"\n").Replace(fixtureManifest)), sum)
		if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), m, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Registry.Install(ctx, dir, registry.InstallOptions{Yes: true}); err != nil {
			t.Fatal(err)
		}
		spec, _ := k.Registry.Runnable(name)
		if err := k.Plugins.Add(spec); err != nil {
			t.Fatal(err)
		}
	}
	call := func(plugin string, args map[string]any) tokenRun {
		t.Helper()
		a, _ := json.Marshal(args)
		r, err := k.Plugins.CallTool(ctx, plugin, tool.Call{ID: "t", Tool: "fx.token", Args: a}, nil)
		if err != nil || !r.OK {
			t.Fatalf("%s: %v %+v", plugin, err, r)
		}
		var out tokenRun
		if err := json.Unmarshal(r.Output, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	tokens := map[string]string{}
	for _, p := range names {
		r := call(p, map[string]any{"path": "a.txt", "max_ops": 5, "nonces": []uint64{1}})
		if r.Token == "" || len(r.Reads) != 1 || r.Reads[0] != "ok:A" {
			t.Fatalf("%s's own token: %+v", p, r)
		}
		tokens[p] = r.Token
	}
	for i, p := range names {
		other := names[1-i]
		r := call(p, map[string]any{"token": tokens[other], "path": "a.txt", "nonces": []uint64{2}})
		if len(r.Reads) != 1 || !strings.HasPrefix(r.Reads[0], callbacks.CodeTokenInvalid) || !strings.Contains(r.Reads[0], "bound to another") {
			t.Fatalf("%s used %s's token: %+v", p, other, r)
		}
		// Its own token still works: the refusal did not disturb it.
		if r := call(p, map[string]any{"token": tokens[p], "path": "a.txt", "nonces": []uint64{3}}); len(r.Reads) != 1 || r.Reads[0] != "ok:A" {
			t.Fatalf("%s's own token after the refusal: %+v", p, r)
		}
	}
}
