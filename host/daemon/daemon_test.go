package daemon

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func home(t *testing.T) string {
	d, err := os.MkdirTemp("", "fhd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestOneKernelPerProjectStatusAndShutdown(t *testing.T) {
	h, proj := home(t), t.TempDir()
	d, err := New(Options{Home: h, Project: proj, Status: map[string]any{"sandbox": "docker"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := New(Options{Home: h, Project: proj}); !uerr.HasCode(err, "KERNEL_RUNNING") {
		t.Fatalf("second kernel for one project: %v", err)
	}
	other, err := New(Options{Home: h, Project: t.TempDir()})
	if err != nil {
		t.Fatalf("a kernel for another project was refused: %v", err)
	}
	other.Close()
	done := make(chan error, 1)
	go func() { done <- d.Serve(context.Background()) }()
	var cl *ipc.Client
	for i := 0; ; i++ {
		cl, err = ipc.Dial(context.Background(), d.Paths().Socket, 0)
		if err == nil {
			break
		}
		if i > 100 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer cl.Close()
	res, err := cl.Call(context.Background(), "kernel.status", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	_ = json.Unmarshal(res, &st)
	if st["project"] != proj || st["sandbox"] != "docker" || st["clients"].(float64) != 1 {
		t.Fatalf("status = %v", st)
	}
	if _, err := cl.Call(context.Background(), "no.such", nil, nil); !uerr.HasCode(err, ipc.CodeUnknownMethod) {
		t.Fatalf("unknown method: %v", err)
	}
	if _, err := cl.Call(context.Background(), "kernel.shutdown", nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("kernel.shutdown did not stop the daemon")
	}
	if _, err := os.Stat(d.Paths().Socket); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestIdleExitWaitsForClientsAndWork(t *testing.T) {
	h, proj := home(t), t.TempDir()
	d, err := New(Options{Home: h, Project: proj, IdleTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	release := d.Busy()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- d.Serve(context.Background()) }()
	select {
	case <-done:
		t.Fatal("exited while busy")
	case <-time.After(time.Second):
	}
	release()
	select {
	case <-done:
		if time.Since(start) < time.Second {
			t.Fatal("exited too early")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not exit when idle")
	}
}
