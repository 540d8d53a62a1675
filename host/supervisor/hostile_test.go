package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// A plugin's error is the plugin's: named, in its own code namespace,
// escaped; it can neither pass for POLICY_DENIED nor paint the terminal.
func TestPluginErrorIsNamespacedAndEscaped(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.sup.Add(fixtureSpec(t, "good", []int{1, 2})); err != nil {
		t.Fatal(err)
	}
	res, err := h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "h", Tool: "fx.hostile_error", Args: json.RawMessage(`{}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := res.Err
	if e == nil {
		t.Fatal("no error")
	}
	if e.Plugin != "fixture" || uerr.HasCode(e, "POLICY_DENIED") || !uerr.HasPluginCode(e, "POLICY_DENIED") {
		t.Fatalf("plugin %q code %q: not in the plugin's namespace", e.Plugin, e.Code)
	}
	out := e.Render()
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "plugin fixture says") || !strings.Contains(out, "not by fluffy") {
		t.Fatalf("rendered: %q", out)
	}
}

// go-plugin logs a plugin's stderr lines as messages, which hclog writes
// raw: the supervisor's logger escapes them.
func TestPluginLoggerEscapes(t *testing.T) {
	var buf bytes.Buffer
	l := newPluginLogger(hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace}))
	l.Named("p").Debug("\x1b[2J\x1b[Hfake line\x9b", "k", "v\x1b]0;t\x07", "n", 3)
	l.With("w", "\x1b[31m").Log(hclog.Info, strings.Repeat("z", 10000))
	s := buf.String()
	if strings.ContainsAny(s, "\x1b\x07\u009b") || !strings.Contains(s, `\x1b[2J`) {
		t.Fatalf("log: %q", s)
	}
	if len(s) > 2*maxPluginLogField+1000 {
		t.Fatalf("log line not bounded: %d bytes", len(s))
	}
}
