package registry

import (
	"testing"
	"time"
)

// A certification is recorded per suite version, profile set and sha256: a
// weaker (`--profile core`) run never replaces a stronger one, a rerun of
// the same scope replaces its predecessor, pass or fail.
func TestAddCertificationKeepsEachScope(t *testing.T) {
	const sha = "aa"
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	full := Certification{SuiteVersion: "2.0.0", SHA256: sha, Passed: true, Profiles: []string{"core", "tool"}, At: at}
	coreFail := Certification{SuiteVersion: "2.0.0", SHA256: sha, Passed: false, Profiles: []string{"core"}, Failed: []string{"CORE-LOG-001"}, At: at.Add(time.Hour)}
	fullRerun := Certification{SuiteVersion: "2.0.0", SHA256: sha, Passed: false, Profiles: []string{"tool", "core"}, Skipped: []string{"CORE-SANDBOX-001"}, At: at.Add(2 * time.Hour)}
	newSuite := Certification{SuiteVersion: "2.1.0", SHA256: sha, Passed: true, Profiles: []string{"core", "tool"}, At: at.Add(3 * time.Hour)}

	// A record written before Certifications existed.
	rec := Record{SHA256: sha, Certification: &full}
	rec.AddCertification(coreFail)
	if len(rec.Certifications) != 2 || rec.Certification.SuiteVersion != "2.0.0" || len(rec.Certification.Profiles) != 2 || !rec.Certification.Passed {
		t.Fatalf("a core-only run replaced the core+tool certification: %+v (all %+v)", rec.Certification, rec.Certifications)
	}
	rec.AddCertification(fullRerun)
	if len(rec.Certifications) != 2 || rec.Certification.Passed || len(rec.Certification.Skipped) != 1 {
		t.Fatalf("a rerun of the same scope must replace it: %+v (all %+v)", rec.Certification, rec.Certifications)
	}
	rec.AddCertification(newSuite)
	if len(rec.Certifications) != 3 || rec.Certification.SuiteVersion != "2.1.0" {
		t.Fatalf("a newer suite's run is its own record and the newest of the strongest: %+v (all %+v)", rec.Certification, rec.Certifications)
	}
	// A certification of another binary never becomes the record's.
	rec.AddCertification(Certification{SuiteVersion: "2.1.0", SHA256: "bb", Passed: true, Profiles: []string{"core", "tool", "x"}, At: at.Add(4 * time.Hour)})
	if rec.Certification.SHA256 != sha {
		t.Fatalf("a certification of another sha256 became the record's: %+v", rec.Certification)
	}
}
