package provider

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// events decodes SSE text as the SDKs' decoders do (a blank line
// dispatches the data lines before it; what is pending at the end of the
// body is dropped) and returns the dispatched data.
func events(r io.Reader) []string {
	var out []string
	var data []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				out = append(out, strings.Join(data, "\n"))
			}
			data = nil
			continue
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
	}
	return out
}

func TestEventStreamBody(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"blank line at the end", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []string{`{"a":1}`, "[DONE]"}},
		{"one line break at the end", "data: {\"a\":1}\n\ndata: [DONE]\n", []string{`{"a":1}`, "[DONE]"}},
		{"CRLF, one line break at the end", "data: {\"a\":1}\r\n\r\ndata: [DONE]\r\n", []string{`{"a":1}`, "[DONE]"}},
		{"[DONE] ends the body", "data: {\"a\":1}\n\ndata: [DONE]", []string{`{"a":1}`, "[DONE]"}},
		{"a whole JSON event ends the body", "event: message_delta\ndata: {\"a\":1}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}", []string{`{"a":1}`, `{"type":"message_stop"}`}},
		{"cut mid-JSON: dropped", "data: {\"a\":1}\n\ndata: {\"type\":\"mess", []string{`{"a":1}`}},
		{"cut in the field name: dropped", "data: {\"a\":1}\n\nda", []string{`{"a":1}`}},
		{"a comment ends the body", "data: {\"a\":1}\n\n: keep-alive", []string{`{"a":1}`}},
		{"empty body", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time: the end is found whatever the reads.
			got := events(EventStreamBody(io.NopCloser(iotest.OneByteReader(strings.NewReader(tc.body)))))
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("events %q, want %q", got, tc.want)
			}
			if whole := events(EventStreamBody(io.NopCloser(strings.NewReader(tc.body)))); strings.Join(whole, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("in one read: events %q, want %q", whole, tc.want)
			}
		})
	}
}

func TestEventStreamBodyLongLastLine(t *testing.T) {
	long := "data: \"" + strings.Repeat("x", maxLastLine) + "\""
	if got := events(EventStreamBody(io.NopCloser(strings.NewReader(long)))); len(got) != 0 {
		t.Fatalf("a last line over the bound was taken as whole (%d events)", len(got))
	}
}

func TestSniffJSON(t *testing.T) {
	for _, tc := range []struct {
		body string
		json bool
	}{
		{"{\"id\":\"x\"}", true},
		{"\n  {\"id\":\"x\"}", true},
		{"data: {}\n\n", false},
		{": ping\n\n", false},
		{"event: message_start\n", false},
		{"", false},
	} {
		ok, r := SniffJSON(strings.NewReader(tc.body))
		rest, _ := io.ReadAll(r)
		if ok != tc.json || strings.TrimLeft(tc.body, " \n") != string(rest) {
			t.Errorf("%q: json=%v rest %q", tc.body, ok, rest)
		}
	}
}

func TestCheckArgumentsNamesTheCall(t *testing.T) {
	for _, tc := range []struct {
		name, raw, why string
	}{
		{"unclosed", `{"path": "a.go", "content": "x`, `"{\"path\": \"a.go\", \"content\": \"x"`},
		{"control characters escaped", "{\"a\":\"\x1b[2J\u202e\"", `"{\"a\":\"\x1b[2J\u202e\""`},
		{"bounded", `{"content": "` + strings.Repeat("é", 400), "… ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end := CheckArguments("toolu_01A09q", "fs.write", tc.raw, false)
			inv := end.Invalid
			if inv == nil || !strings.Contains(inv.What, "toolu_01A09q") || !strings.Contains(inv.What, "fs.write") {
				t.Fatalf("invalid %+v", inv)
			}
			if !strings.Contains(inv.Why, tc.why) || strings.ContainsAny(inv.Why, "\x1b\n\u202e") || len(inv.Why) > 2*maxShownArguments {
				t.Fatalf("why %q lacks %q or is unbounded", inv.Why, tc.why)
			}
		})
	}
}
