package redact

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// containsAny is the reference the one-pass pre-scan must agree with.
func containsAny(r *Redactor, s string) bool {
	for _, t := range r.triggers {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

func TestPrescanMatchesContains(t *testing.T) {
	r := New()
	cases := []string{
		"", "s", "sk", "sk-", "xsk-", "task-list", "ghp", "ghp_", "gh_p", "github_pat", "github_pat_",
		"AKI", "AKIA", "ASI", "ASIA", "xo", "xox", "earer", "EARER", "Earer", "bEaReR", "BeArEr x",
		"PRIVATE KE", "PRIVATE KEY", "private key", "-----BEGIN RSA PRIVATE KEY-----",
		"read /workspace/internal/parser/config.go lines 1-200", "200 lines, 6.1 KiB",
		"Authorization: Bearer abc", "ends with sk-", "ends with gh", "ghghp_", "AAKIA", "xxox",
		"ünïcödé sk-ünï", "\xff\xfeghs_\x00",
	}
	for _, tr := range r.triggers { // every trigger at the start, middle and end
		cases = append(cases, tr, "a"+tr, tr+"z", "pre "+tr+" post", tr[:len(tr)-1], tr[1:])
	}
	for _, s := range cases {
		if got, want := r.mayHoldSecret(s), containsAny(r, s); got != want {
			t.Errorf("mayHoldSecret(%q) = %v, strings.Contains says %v", s, got, want)
		}
	}
	// Random strings over an alphabet rich in trigger bytes.
	rng := rand.New(rand.NewPCG(1, 2))
	const alpha = "skghpousrtiba_-AKISERxPVTEY e"
	for n := 0; n < 200000; n++ {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		s := string(b)
		if got, want := r.mayHoldSecret(s), containsAny(r, s); got != want {
			t.Fatalf("mayHoldSecret(%q) = %v, strings.Contains says %v", s, got, want)
		}
	}
}

func FuzzPrescan(f *testing.F) {
	r := New()
	for _, s := range []string{"sk-abc", "github_pat_x", "plain text", "Bearer x", "AKIAXX"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := r.mayHoldSecret(s), containsAny(r, s); got != want {
			t.Fatalf("mayHoldSecret(%q) = %v, strings.Contains says %v", s, got, want)
		}
	})
}

// BenchmarkRedactClean is the common case: text with no candidate secret.
// BenchmarkRedactCleanBaseline runs the per-trigger strings.Contains
// pre-check the one-pass scan replaced, on the same text.
func BenchmarkRedactClean(b *testing.B) {
	r := New()
	s := "read /workspace/internal/parser/config.go lines 1-200"
	b.ReportAllocs()
	for b.Loop() {
		if r.Redact(s) != s {
			b.Fatal("changed")
		}
	}
}

func BenchmarkRedactCleanBaseline(b *testing.B) {
	r := New()
	s := "read /workspace/internal/parser/config.go lines 1-200"
	b.ReportAllocs()
	for b.Loop() {
		if containsAny(r, s) {
			b.Fatal("hit")
		}
	}
}
