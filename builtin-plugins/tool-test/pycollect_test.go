package main

import (
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// TestPytestExitCrossCheck: a report whose classification pytest's exit
// code contradicts is not trusted.
func TestPytestExitCrossCheck(t *testing.T) {
	withBE := testrun.Run{Status: testrun.Red, BuildErrors: []testrun.BuildError{{File: "t/test_a.py"}}}
	cases := []struct {
		run     testrun.Run
		code    int
		trusted bool
	}{
		{testrun.Run{Status: testrun.Green}, 0, true},
		{testrun.Run{Status: testrun.Green}, 1, false},
		{testrun.Run{Status: testrun.Red}, 1, true},
		{testrun.Run{Status: testrun.Red}, 0, false},
		{testrun.Run{Status: testrun.Red}, 2, false},
		{withBE, 2, true},
		{testrun.Run{Status: testrun.BuildFailed}, 2, true},
		{testrun.Run{Status: testrun.BuildFailed}, 1, true}, // --continue-on-collection-errors
		{testrun.Run{Status: testrun.NoTests}, 5, true},
		{testrun.Run{Status: testrun.NoTests}, 0, true},
		{testrun.Run{Status: testrun.NoTests}, 4, false},
	}
	for _, c := range cases {
		if got := pytestExitDisagrees(c.run, c.code) == ""; got != c.trusted {
			t.Errorf("%s with exit %d: trusted %v, want %v", c.run.Status, c.code, got, c.trusted)
		}
	}
}

// TestPytestCollectErrorUnknownShape: a collection failure the reader
// does not recognise is a build error, never red.
func TestPytestCollectErrorUnknownShape(t *testing.T) {
	c := junitCase{Name: "pkg.test_a", Error: &junitProblem{Message: pytestCollectionFailure, Text: "something new\nImportError somewhere"}}
	be := pytestCollectError(c, t.TempDir())
	if be.Undefined || be.InTestFile || be.File != "pkg/test_a.py" {
		t.Fatalf("%+v", be)
	}
}
