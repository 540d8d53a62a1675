package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
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

// Point 5: a plugin cannot make the kernel buffer an unbounded message, an
// unbounded error or an unbounded stream of progress.
func TestHostileOutputsAreBounded(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.sup.Add(fixtureSpec(t, "good", []int{1, 2})); err != nil {
		t.Fatal(err)
	}
	call := func(tl, args string, p func(tool.Progress)) (tool.Result, error) {
		return h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "h", Tool: tl, Args: json.RawMessage(args)}, p)
	}
	cases := []struct {
		name, tool, args string
	}{
		{"huge result", "fx.flood", `{"bytes":67108864}`},
		{"huge error", "fx.hostile_error", `{"bytes":67108864}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := call(c.tool, c.args, nil)
			if !uerr.HasCode(err, CodeResponseTooLarge) {
				t.Fatalf("want %s, got %v", CodeResponseTooLarge, err)
			}
		})
	}
	t.Run("error fields capped", func(t *testing.T) {
		res, err := call("fx.hostile_error", `{"bytes":1048576}`, nil)
		if err != nil || res.Err == nil {
			t.Fatalf("%v %+v", err, res)
		}
		if len(res.Err.Why) > uerr.MaxWhy+32 || len(res.Err.What) > uerr.MaxWhat+32 {
			t.Fatalf("why %d bytes, what %d bytes", len(res.Err.Why), len(res.Err.What))
		}
	})
	t.Run("progress flood coalesced", func(t *testing.T) {
		var got []tool.Progress
		start := time.Now()
		res, err := call("fx.progress_flood", `{"count":100000,"bytes":100}`, func(p tool.Progress) { got = append(got, p) })
		elapsed := time.Since(start)
		if err != nil || !res.OK {
			t.Fatalf("%v %+v", err, res)
		}
		// At most one event per interval, plus the first and the flushed last.
		if max := int(elapsed/DefaultProgressInterval) + 2; len(got) > max || len(got) == 0 {
			t.Fatalf("%d progress events passed on in %s (max %d)", len(got), elapsed, max)
		}
		for _, p := range got {
			if len(p.Message) > MaxProgressMessage+32 || strings.ContainsAny(p.Message, "\x1b\r") {
				t.Fatalf("progress message not bounded/escaped: %d bytes %q", len(p.Message), p.Message[:40])
			}
		}
	})
	// The plugin was restarted after its oversized messages and still works.
	if _, err := echo(t, h.sup, "fixture"); err != nil {
		t.Fatal(err)
	}
}
