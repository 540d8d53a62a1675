package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
	pt "github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// TestOpenAIRecordings serves bodies recorded in the style of real
// OpenAI-compatible servers (testdata/streams), byte for byte, including
// how each ends: the answer is whole once the API's finish_reason
// arrived, whatever the transport's end looks like.
func TestOpenAIRecordings(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	for _, tc := range []struct {
		file     string
		text     string
		thinking string
		calls    []string // the path argument of each call, in order
		stop     string
		usage    provider.Usage
	}{
		{"llamacpp-done-without-blank-line.sse", "parseConfig reads key=value lines.", "", nil, provider.StopEndTurn, provider.Usage{InputTokens: 412, OutputTokens: 9}},
		{"done-without-line-break.sse", "It returns a Config.", "", nil, provider.StopEndTurn, provider.Usage{}},
		{"finish-without-done.sse", "", "", []string{"src/config.go"}, provider.StopToolUse, provider.Usage{InputTokens: 38, OutputTokens: 22, CacheReadTokens: 1152}},
		{"mistral-thinking-parts.sse", "It parses key=value lines.", "The user asks what parseConfig does.", nil, provider.StopEndTurn, provider.Usage{InputTokens: 220, OutputTokens: 31}},
		{"non-streamed-completion.json", "Reading both files.", "", []string{"a.go", "b.go"}, provider.StopToolUse, provider.Usage{InputTokens: 188, OutputTokens: 41}},
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
			if o.res.Text != tc.text || o.res.Done == nil || o.res.Done.StopReason != tc.stop || o.res.Usage != tc.usage {
				t.Fatalf("text %q done %+v usage %+v", o.res.Text, o.res.Done, o.res.Usage)
			}
			var thinking []string
			for _, r := range o.res.Reasoning {
				thinking = append(thinking, r.Text)
			}
			if strings.Join(thinking, "|") != tc.thinking {
				t.Fatalf("reasoning %q, want %q", thinking, tc.thinking)
			}
			if len(o.res.ToolCalls) != len(tc.calls) {
				t.Fatalf("calls %+v, want %d", o.res.ToolCalls, len(tc.calls))
			}
			for i, call := range o.res.ToolCalls {
				if call.Invalid != nil || call.Name != "fs.read" || args(t, call)["path"] != tc.calls[i] {
					t.Fatalf("call %d %+v", i, call)
				}
			}
		})
	}
}
