package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

const pluginPkg = "builtin-plugins/tool-test"

// TestRunInDockerSandbox runs test.run in a real L2 container through the
// kernel on real Go modules: the classification table, the full log in
// /out, and test code unable to write the build cache or /out.
func TestRunInDockerSandbox(t *testing.T) {
	ws := t.TempDir()
	_ = os.Chmod(ws, 0o755)
	writeGoFixtures(t, ws)
	e := kerneltest.Start(t, ws, kerneltest.Options{}, pluginPkg)
	for i, c := range classCases {
		t.Run(c.name, func(t *testing.T) {
			op := fmt.Sprintf("op%d", i) // an operation id is a directory name
			res := e.Call(t, "tool-test", "test.run", op, c.args)
			if !res.OK {
				t.Fatalf("test.run %s: %+v", c.args, res.Err)
			}
			r, err := testrun.Decode(res.Output)
			if err != nil {
				t.Fatalf("kernel refuses the output %s: %v", res.Output, err)
			}
			if r.Status != c.status {
				t.Fatalf("status %s, want %s\nsummary: %s\noutput: %s", r.Status, c.status, r.Summary, r.Output)
			}
			if c.check != nil {
				c.check(t, r)
			}
			if _, err := os.Stat(filepath.Join(outDir(t, e), op, r.LogFile)); r.LogFile == "" || err != nil {
				t.Errorf("full log %q: %v", r.LogFile, err)
			}
			t.Logf("%s in %d ms", r.Status, r.DurationMS)
		})
	}
	// Nothing the poison test tried landed in the build cache.
	var found []string
	filepath.Walk(e.Home, func(p string, fi os.FileInfo, err error) error {
		if err == nil && (fi.Name() == "poisoned-by-test" || fi.Name() == "poisoned-dir") {
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Fatalf("test code wrote outside its scratch directory: %v", found)
	}
	noBytecode(t, ws)
	// Arguments are checked before anything runs.
	res := e.Call(t, "tool-test", "test.run", "opz", `{"path":"../"}`)
	if res.OK || res.Err == nil {
		b, _ := json.Marshal(res)
		t.Fatalf("path escape accepted: %s", b)
	}
}

// outDir is the host directory of tool-test's running instance's /out.
func outDir(t *testing.T, e *kerneltest.Env) string {
	t.Helper()
	st, err := e.Kernel.Plugins.Stats("tool-test")
	if err != nil || st.InstanceID == "" {
		t.Fatalf("tool-test is not running: %v", err)
	}
	return filepath.Join(e.Kernel.Session.Dir(), "out", st.InstanceID)
}

// TestCargoToolchainPinInDockerSandbox: the same pins through the kernel
// in a real L2 container, where RUSTUP_HOME is the policy's read-only
// mount of ~/.rustup.
func TestCargoToolchainPinInDockerSandbox(t *testing.T) {
	ws := t.TempDir()
	_ = os.Chmod(ws, 0o755)
	rh, cases := writePinFixtures(t, ws)
	e := kerneltest.Start(t, ws, kerneltest.Options{}, pluginPkg)
	for i, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			op := fmt.Sprintf("pin%d", i)
			res := e.Call(t, "tool-test", "test.run", op, `{"path":"`+c.path+`"}`)
			if !res.OK {
				t.Fatalf("test.run: %+v", res.Err)
			}
			r, err := testrun.Decode(res.Output)
			if err != nil {
				t.Fatalf("kernel refuses the output %s: %v", res.Output, err)
			}
			log, _ := os.ReadFile(filepath.Join(outDir(t, e), op, r.LogFile))
			checkPin(t, c, rh, r, log)
		})
	}
}
