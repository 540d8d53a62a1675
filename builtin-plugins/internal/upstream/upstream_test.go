package upstream

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/uerr"
)

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []SSEEvent
		end      error
	}{
		{"lf", "data: a\n\ndata: b\n\n", []SSEEvent{{Data: []byte("a")}, {Data: []byte("b")}}, io.EOF},
		{"crlf, event field, no space", "event: ping\r\ndata:{}\r\n\r\n", []SSEEvent{{Event: "ping", Data: []byte("{}")}}, io.EOF},
		{"comments and blank lines", ": keep-alive\n\n\n\ndata: x\n\n", []SSEEvent{{Data: []byte("x")}}, io.EOF},
		{"multi-line data", "data: a\ndata: b\n\n", []SSEEvent{{Data: []byte("a\nb")}}, io.EOF},
		{"unknown fields ignored", "id: 7\nretry: 10\ndata: x\n\n", []SSEEvent{{Data: []byte("x")}}, io.EOF},
		{"cut mid-event", "data: a\n\ndata: {\"x", []SSEEvent{{Data: []byte("a")}, {Data: []byte(`{"x`)}}, io.ErrUnexpectedEOF},
		{"over the event bound", "data: " + strings.Repeat("y", MaxEventBytes+1) + "\n\n", nil, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewSSEReader(strings.NewReader(tc.in))
			var got []SSEEvent
			var err error
			for {
				var ev SSEEvent
				ev, err = r.Next()
				if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
					got = append(got, ev)
				}
				if err != nil {
					break
				}
			}
			if !errors.Is(err, tc.end) {
				t.Fatalf("end %v, want %v", err, tc.end)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i].Event != tc.want[i].Event || string(got[i].Data) != string(tc.want[i].Data) {
					t.Fatalf("event %d %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {now.Add(10 * time.Second).Format(http.TimeFormat)}}, 10 * time.Second},
		{http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{}, 0},
	} {
		if got := RetryAfter(tc.h, now); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestClassifyBoundsAndEscapesUpstreamText(t *testing.T) {
	u := Upstream{Name: "X", ConfigKey: "providers.x", KeyEnv: "X_KEY"}
	e := u.Classify(500, "server_error", "", "bad\x1b[31m "+strings.Repeat("z", 2000), provider.RetryInfo{})
	if strings.ContainsRune(e.Why, 0x1b) || len(e.Why) > 700 {
		t.Fatalf("why not cleaned or bounded (%d bytes): %q", len(e.Why), e.Why)
	}
	if !uerr.HasCode(e, provider.CodeUpstream) || !provider.RetryOf(e).Retryable {
		t.Fatalf("%+v", e)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{"api_key":"k"}`), "p", "https://api.example.com/v1/")
	if err != nil || c.BaseURL != "https://api.example.com/v1" || strings.Contains(c.String(), "k ") || !strings.Contains(c.String(), "api_key=set") {
		t.Fatalf("%+v %v %s", c, err, c.String())
	}
	for _, bad := range []string{`{`, `{"base_url":"ftp://x"}`, `{"base_url":"https://x","api_key":"a\nb"}`} {
		if _, err := ParseConfig([]byte(bad), "p", "https://d"); !uerr.HasCode(err, provider.CodeConfig) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
