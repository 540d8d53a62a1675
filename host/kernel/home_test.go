package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// TestKernelsOfManyProjectsShareOneHome: kernels of three projects open
// at once on one $FLUFFY_HOME (the first used to hold the home database
// for its life, so the others failed with STORE_LOCKED), each runs its
// builtin plugin, and a registry change made meanwhile (as the plugin CLI
// makes it) is seen by all; every process's registry events form one
// intact home audit chain.
func TestKernelsOfManyProjectsShareOneHome(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	builtin := filepath.Dir(stage(t))
	const n = 3
	ks := make([]*Kernel, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ws := t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ks[i], errs[i] = Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, BuiltinDirs: []string{builtin}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("kernel %d: %v", i, err)
		}
		t.Cleanup(ks[i].Close)
	}
	// The CLI's way in, while the kernels run.
	cli, err := OpenHome(home, HomeOptions{Command: "fluffy plugin"})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	reg := cli.Registry(home, nil)
	if err := reg.Disable(ctx, "tool-fs", "testing"); err != nil {
		t.Fatalf("disable while kernels run: %v", err)
	}
	for i, k := range ks {
		if st := regState(t, k, "tool-fs"); st != registry.StateDisabled {
			t.Fatalf("kernel %d sees tool-fs %s after the CLI disabled it", i, st)
		}
	}
	if err := reg.Enable(ctx, "tool-fs"); err != nil {
		t.Fatalf("enable while kernels run: %v", err)
	}
	// All at once: plugin calls and registry events from every kernel.
	for i, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "1", Tool: "fs.exists", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil)
			if err != nil || !res.OK {
				errs[i] = fmt.Errorf("call: %v %+v", err, res)
				return
			}
			for j := range 5 {
				if err := k.Registry.SetState(ctx, "tool-fs", mustGet(t, k).Version, registry.StateRegistered, fmt.Sprintf("kernel %d round %d", i, j)); err != nil {
					errs[i] = err
					return
				}
				if _, err := k.HomeAudit.Append(ctx, audit.Event{Type: audit.EventSyscall, Caller: fmt.Sprintf("kernel-%d", i)}); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("kernel %d: %v", i, err)
		}
	}
	for _, k := range ks {
		k.Close()
	}
	_ = cli.Close()
	log, err := audit.Open(ctx, audit.Options{Dir: HomeDB(home)})
	if err != nil {
		t.Fatalf("home audit log after the kernels closed: %v", err)
	}
	defer log.Close()
	rep, err := log.Verify(ctx, true)
	if err != nil || !rep.OK() {
		t.Fatalf("home audit chain: %v %+v", err, rep)
	}
	calls, err := log.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventSyscall}})
	if err != nil || len(calls) != n*5 {
		t.Fatalf("%d syscall records of %d: %v", len(calls), n*5, err)
	}
	for _, typ := range []audit.EventType{"plugin_disable", "plugin_enable"} {
		if recs, err := log.Recent(ctx, 1, typ); err != nil || len(recs) != 1 {
			t.Fatalf("%s not in the home log: %v %d", typ, err, len(recs))
		}
	}
}

func mustGet(t *testing.T, k *Kernel) registry.Record {
	r, err := k.Registry.Get("tool-fs")
	if err != nil {
		t.Error(err)
	}
	return r
}

// TestHomeDatabaseIsNotHeldByARunningKernel: between operations a running
// kernel does not have the home database open, so another process can
// open it outright.
func TestHomeDatabaseIsNotHeldByARunningKernel(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	k := openNone(t, home, ws, nil)
	if _, err := k.Registry.List(registry.Filter{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !k.homeDB.DB.Open() }, "the kernel to let go of the home database")
	db, err := store.Open(context.Background(), store.Options{Dir: HomeDB(home)})
	if err != nil {
		t.Fatalf("open the home database while a kernel runs: %v", err)
	}
	_ = db.Close()
}

// TestProjectDatabaseLockNamesTheKernel: the project database a kernel
// holds is reported, to whoever else opens it, as held by that kernel of
// that project, with the command that stops it.
func TestProjectDatabaseLockNamesTheKernel(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	openNone(t, home, ws, nil)
	_, err := store.Open(context.Background(), store.Options{Dir: store.DefaultDir(ws)})
	ue, ok := uerr.As(err)
	if !ok || ue.Code != store.CodeLocked {
		t.Fatalf("open while the kernel runs: %v", err)
	}
	for _, want := range []string{fmt.Sprintf("fluffy kernel (pid %d, project %s)", os.Getpid(), ws)} {
		if !strings.Contains(ue.Why, want) {
			t.Errorf("why %q lacks %q", ue.Why, want)
		}
	}
	if want := "`fluffy kernel stop --project " + ws + "`"; !strings.Contains(ue.Fix, want) {
		t.Errorf("fix %q lacks %q", ue.Fix, want)
	}
}
