package main

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/agent"
)

// A one-shot review at a plain terminal asks again on a line that is not
// an answer or a scope the review does not offer, instead of sending the
// kernel an answer it refuses (which left the review waiting).
func TestLineReviewerAsksAgain(t *testing.T) {
	rv := &agent.ReviewEvent{ID: "r1", Kind: "tool", Scopes: []string{"once", "session"}}
	cases := []struct {
		name, input, scope, decision string
		reprompts                    int
		eof                          bool
	}{
		{"first answer fits", "/approve session\n", "session", "approve", 1, false},
		{"garbage, then a scope not offered, then one that is", "maybe\n/approve always\n/approve session\n", "session", "approve", 3, false},
		{"reject needs no scope", "/reject not now\n", "", "reject", 1, false},
		{"input ends", "hmm\n", "", "", 2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			l := lineReviewer{in: bufio.NewReader(strings.NewReader(c.input)), out: &out}
			resp, err := l.review(context.Background(), rv)
			if c.eof {
				if err == nil {
					t.Fatalf("want the end of input as an error, got %+v", resp)
				}
			} else if err != nil || resp.Decision != c.decision || (c.scope != "" && resp.Scope != c.scope) {
				t.Fatalf("answer %+v %v", resp, err)
			}
			if n := strings.Count(out.String(), "review> "); n != c.reprompts {
				t.Fatalf("%d prompts, want %d:\n%s", n, c.reprompts, out.String())
			}
			if strings.Contains(c.input, "always") && !strings.Contains(out.String(), `"always" is not offered`) {
				t.Fatalf("the refused scope was not explained:\n%s", out.String())
			}
		})
	}
}
