package upstream

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

func TestBoundedBody(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		err      error
	}{
		{"lines within the bound", strings.Repeat("data: x\n\n", 1000), nil},
		{"one line over the event bound", "data: " + strings.Repeat("y", MaxEventBytes+1) + "\n\n", ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := io.ReadAll(&boundedBody{rc: io.NopCloser(strings.NewReader(tc.in))})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
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
