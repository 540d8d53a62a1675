package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

// TestConformanceCassetteIsTheSuiteUpstream: the shipped conformance
// cassette is exactly what the suite's probes and fake upstream make, and
// it parses.
func TestConformanceCassetteIsTheSuiteUpstream(t *testing.T) {
	want := conformance.ProbeCassette()
	if os.Getenv("FLUFFY_UPDATE_CASSETTE") == "1" {
		if err := os.WriteFile("conformance.jsonl", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if conformanceCassette != want {
		t.Fatalf("conformance.jsonl is not the suite's probes and answers; rebuild it with FLUFFY_UPDATE_CASSETTE=1 go test -run %s ./builtin-plugins/provider-replay/\n%s", t.Name(), want)
	}
	if _, err := cassette.Parse(strings.NewReader(conformanceCassette)); err != nil {
		t.Fatal(err)
	}
}

// TestConformanceProviderProfile: provider-replay is certified on the core
// and provider profiles both as `fluffy conformance run PATH` runs it (the
// suite sends its probes' answers as the cassette) and with the cassette it
// ships (`--config '{"builtin_cassette":"conformance"}'`): the probes get the
// suite's text, tool call and error, a cancelled slow stream stops, and
// PROVIDER-PROXY-001 does not apply (no network is declared and no
// connection was made).
func TestConformanceProviderProfile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config json.RawMessage
	}{
		{"no configuration", nil},
		{"builtin cassette", json.RawMessage(`{"builtin_cassette":"conformance"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := kerneltest.ConformanceConfig(t, "builtin-plugins/provider-replay", tc.config, conformance.ProfileCore, conformance.ProfileProvider)
			if !rep.Passed() {
				t.Fatalf("not certified: %s", rep.Summary())
			}
			for id, want := range map[string]conformance.Status{"PROVIDER-STREAM-001": conformance.Pass, "PROVIDER-TOOLCALL-001": conformance.Pass,
				"PROVIDER-CANCEL-001": conformance.Pass, "PROVIDER-ERROR-001": conformance.Pass, "PROVIDER-PROXY-001": conformance.NotApplicable,
				"CORE-SANDBOX-001": conformance.Pass} {
				if r, ok := rep.Result(id); !ok || r.Status != want {
					t.Errorf("%s: %s %s, want %s", id, r.Status, r.Message, want)
				}
			}
		})
	}
}
