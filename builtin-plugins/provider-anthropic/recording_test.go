package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
	pt "github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// TestAnthropicRecordings serves bodies recorded in the style of the
// Messages API and compatible servers (testdata/streams), byte for byte,
// including how each ends.
func TestAnthropicRecordings(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	for _, tc := range []struct {
		file     string
		text     string
		thinking string
		calls    []string // each call's id and arguments, as "id path"
		stop     string
		check    func(t *testing.T, o outcome)
	}{
		{file: "message-stop-without-blank-line.sse", text: "parseConfig reads key=value lines.", stop: provider.StopEndTurn},
		{file: "message-stop-without-line-break.sse", text: "parseConfig reads key=value lines.", stop: provider.StopEndTurn},
		{file: "non-streamed-message.json", text: "Reading both.", thinking: "Both files are needed.", stop: provider.StopToolUse,
			calls: []string{"toolu_01T1x1fJ34qAmk2tNTrN7Up6 a.go", "toolu_01Lq8Rw3nB6dMEfVv2yZ9kXo b.go"},
			check: func(t *testing.T, o outcome) {
				if o.res.Reasoning[0].Signature != "ErUBCkYIBRgCIkDpq3bQ" || o.res.Usage != (provider.Usage{InputTokens: 612, OutputTokens: 88}) {
					t.Fatalf("reasoning %+v usage %+v", o.res.Reasoning, o.res.Usage)
				}
			}},
		{file: "invalid-tool-json.sse", stop: provider.StopToolUse,
			check: func(t *testing.T, o outcome) {
				// The call arrives, is not executed, and its error names the
				// call and shows the JSON that does not parse.
				if len(o.res.ToolCalls) != 1 {
					t.Fatalf("calls %+v", o.res.ToolCalls)
				}
				call := o.res.ToolCalls[0]
				inv := call.Invalid
				if inv == nil || inv.Code != provider.CodeInvalidToolCall || string(call.Arguments) != "{}" {
					t.Fatalf("call %+v", call)
				}
				if !strings.Contains(inv.What, "toolu_01A09q90qw90lq917835lq9") || !strings.Contains(inv.What, "fs_write") {
					t.Fatalf("the error does not name the call: %q", inv.What)
				}
				if !strings.Contains(inv.Why, `{\"path\": \"a.go\", \"content\": \"package a\\n\"\"}`) || strings.Contains(inv.Why, "\n") {
					t.Fatalf("the error does not show the invalid JSON, escaped: %q", inv.Why)
				}
			}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			sc, err := pt.Recording(filepath.Join("testdata", "streams", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			before := len(srv.Requests())
			srv.Play(sc)
			o := run(context.Background(), c, chatReq)
			if o.err != nil {
				t.Fatalf("the whole answer failed: %v", o.err)
			}
			if n := len(srv.Requests()) - before; n != 1 {
				t.Fatalf("%d requests for one whole answer", n)
			}
			if o.res.Text != tc.text || o.res.Done == nil || o.res.Done.StopReason != tc.stop || o.res.Done.Model != "claude-sonnet-4-5-20250929" {
				t.Fatalf("text %q done %+v", o.res.Text, o.res.Done)
			}
			var thinking []string
			for _, r := range o.res.Reasoning {
				thinking = append(thinking, r.Text)
			}
			if strings.Join(thinking, "|") != tc.thinking {
				t.Fatalf("reasoning %q, want %q", thinking, tc.thinking)
			}
			if tc.calls != nil {
				var got []string
				for _, call := range o.res.ToolCalls {
					if call.Invalid != nil || call.Name != "fs.read" {
						t.Fatalf("call %+v", call)
					}
					got = append(got, call.CallID+" "+args(t, call)["path"].(string))
				}
				if strings.Join(got, ",") != strings.Join(tc.calls, ",") {
					t.Fatalf("calls %q, want %q", got, tc.calls)
				}
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}
