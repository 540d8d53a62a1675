package spec

import (
	"bytes"
	"encoding/xml"
	"os"
	"strings"
	"testing"
)

// A skipped MUST item means "not certified", and the verdict, the text
// report, JUnit and the stored certification say the same; a skipped
// SHOULD and an item that does not apply change nothing.
func TestSkippedMUSTIsNotCertified(t *testing.T) {
	item := func(id string, l Level) Item {
		return Item{ID: id, Level: l, Profile: ProfileCore, Statement: "s", Source: "x"}
	}
	for _, c := range []struct {
		name      string
		results   []Result
		passed    bool
		verdict   string
		junitFail int
	}{
		{"all pass", []Result{{Item: item("CORE-A", MUST), Status: Pass}}, true, "PASSED", 0},
		{"skipped MUST", []Result{{Item: item("CORE-A", MUST), Status: Pass}, {Item: item("CORE-SANDBOX-001", MUST), Status: Skip, Message: "L2 sandbox runtime not available"}}, false, "NOT CERTIFIED (MUST not checked: CORE-SANDBOX-001)", 1},
		{"failed and skipped", []Result{{Item: item("CORE-A", MUST), Status: Fail}, {Item: item("CORE-B", MUST), Status: Skip}}, false, "FAILED (MUST: CORE-A; MUST not checked: CORE-B)", 2},
		{"skipped SHOULD, n/a MUST", []Result{{Item: item("CORE-A", SHOULD), Status: Skip}, {Item: item("CORE-B", MUST), Status: NotApplicable}}, true, "PASSED", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{SuiteVersion: SuiteVersion, Plugin: "p", Profiles: []string{ProfileCore}, Results: c.results}
			if r.Passed() != c.passed {
				t.Fatalf("Passed() = %v", r.Passed())
			}
			if !strings.HasPrefix(r.Summary(), c.verdict+":") {
				t.Fatalf("summary %q, want verdict %q", r.Summary(), c.verdict)
			}
			var txt bytes.Buffer
			_ = r.WriteText(&txt)
			if !strings.Contains(txt.String(), c.verdict) {
				t.Fatalf("text report lacks %q:\n%s", c.verdict, txt.String())
			}
			var x bytes.Buffer
			if err := r.WriteJUnit(&x); err != nil {
				t.Fatal(err)
			}
			var js struct {
				Suites []struct {
					Failures int `xml:"failures,attr"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal(x.Bytes(), &js); err != nil || len(js.Suites) != 1 || js.Suites[0].Failures != c.junitFail {
				t.Fatalf("JUnit failures %+v (err %v), want %d:\n%s", js, err, c.junitFail, x.String())
			}
		})
	}
}

// The catalogue is well formed: unique IDs prefixed by their profile, a
// level, a statement, a source and a known profile for every item.
func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, it := range Catalogue() {
		if seen[it.ID] {
			t.Errorf("duplicate ID %s", it.ID)
		}
		seen[it.ID] = true
		if it.Statement == "" || it.Source == "" || (it.Level != MUST && it.Level != SHOULD) || !KnownProfile(it.Profile) {
			t.Errorf("incomplete item %+v", it)
		}
		if !strings.HasPrefix(it.ID, strings.ToUpper(it.Profile)+"-") {
			t.Errorf("%s is not prefixed by its profile %s", it.ID, it.Profile)
		}
	}
}

// docs/conformance.md carries the catalogue as CatalogueMarkdown renders
// it: one source, so the doc cannot promise an item the suite lacks.
func TestCatalogueDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, MarkdownBegin), strings.Index(doc, MarkdownEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/conformance.md lacks the catalogue markers %q … %q", MarkdownBegin, MarkdownEnd)
	}
	if got := strings.TrimSpace(doc[i+len(MarkdownBegin) : j]); got != strings.TrimSpace(CatalogueMarkdown()) {
		t.Fatalf("docs/conformance.md's catalogue is out of date: regenerate it with `fluffy conformance list --markdown`\ngot:\n%s\nwant:\n%s", got, CatalogueMarkdown())
	}
	ids := 0
	for _, l := range strings.Split(doc[i:j], "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| ID ") {
			ids++
		}
	}
	if ids != len(Catalogue()) {
		t.Fatalf("the doc lists %d items, the catalogue has %d", ids, len(Catalogue()))
	}
}
