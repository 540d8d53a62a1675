package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// needEngine skips only when no Docker engine is reachable and
// FLUFFY_REQUIRE_DOCKER is not set (CI sets it).
func needEngine(t *testing.T, a *adapter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.Ping(ctx); err != nil {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but the engine does not answer: %v", err)
		}
		t.Skipf("no Docker engine: %v", err)
	}
}

// An engine error that quotes what it was sent (here a 6 KB container
// name) reaches the caller bounded and escaped, still saying what failed.
func TestEngineErrorsAreBounded(t *testing.T) {
	a := newAdapter()
	needEngine(t, a)
	for _, tc := range []struct {
		name string
		spec runtime.Spec
		want string
	}{
		{"invalid name", runtime.Spec{Name: strings.Repeat("!", 6000), Image: "fluffy-no-such-image:none", Cmd: []string{"true"}}, "create container"},
		{"escape bytes in name", runtime.Spec{Name: "\x1b[31m" + strings.Repeat("\x1b", 3000), Image: "fluffy-no-such-image:none", Cmd: []string{"true"}}, "create container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id, err := a.Create(ctx, tc.spec)
			if err == nil {
				_ = a.Remove(context.Background(), id, true, true)
				t.Fatal("the engine accepted the spec")
			}
			msg := err.Error()
			if len(msg) > 1500 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "bytes]") || strings.Contains(msg, "\x1b") {
				t.Fatalf("error not bounded and escaped (%d bytes): %.300q", len(msg), msg)
			}
		})
	}
}
