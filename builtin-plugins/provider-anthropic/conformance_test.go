package main

import (
	"context"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
)

// TestConformanceProviderProfile runs fluffy's conformance suite (core and
// provider profiles) on the built plugin against the suite's own fake
// upstream. No MUST item may fail.
func TestConformanceProviderProfile(t *testing.T) {
	dir := kerneltest.Stage(t, "builtin-plugins/provider-anthropic")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := conformance.New(conformance.Options{}).Run(ctx, dir, []string{conformance.ProfileCore, conformance.ProfileProvider})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Profile == conformance.ProfileProvider || r.Status == conformance.Fail {
			t.Logf("%s %s: %s", r.ID, r.Status, r.Message)
		}
	}
	if !rep.Passed() {
		t.Fatalf("MUST items failed: %v", rep.FailedMUST())
	}
	for _, id := range []string{"PROVIDER-STREAM-001", "PROVIDER-TOOLCALL-001", "PROVIDER-CANCEL-001", "PROVIDER-ERROR-001"} {
		if r, ok := rep.Result(id); !ok || r.Status != conformance.Pass {
			t.Errorf("%s: %+v", id, r)
		}
	}
}
