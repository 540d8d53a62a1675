package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/fluffy-waffle/fluffy/host/policyverbs"
	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Codes of `fluffy policy trust`.
const (
	CodeTrustReviewRequired = "POLICY_TRUST_REVIEW_REQUIRED"
	CodeTrustRejected       = "POLICY_TRUST_REJECTED"
	CodeTrustNoFile         = "POLICY_TRUST_NO_FILE"
)

// policyTrust implements `fluffy policy trust`: the project's policy file
// (as a clone shipped it, or as edited by hand) is shown — its changes
// since the version last trusted, or against the embedded default — and
// pinned by hash in $FLUFFY_HOME once the person approves it. Until then
// the embedded default applies (policy/pin).
func policyTrustFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectFlag(fs)
	yes := fs.Bool("yes", false, "trust the file without an interactive question (you reviewed it); needed without a terminal")
	return func([]string) error { return policyTrust(e, project, yes) }
}

func policyTrust(e *env, project *string, yes *bool) error {
	path := projectPolicyPath(*project)
	content, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return uerr.New(CodeTrustNoFile, "no project policy to trust", path+" does not exist, so the embedded default policy applies",
			"write a policy with `fluffy policy update FILE` (it is trusted as it is written)")
	}
	if err != nil {
		return uerr.Wrap(err, policyverbs.CodeRead, "cannot read "+path, err.Error(), "check its permissions")
	}
	tr, err := policyverbs.New(e.home, e.log).PrepareTrust(*project, path, content)
	if err != nil {
		return err
	}
	p := tr.Policy
	w := e.stdout
	if tr.Trusted {
		fmt.Fprintf(w, "Already trusted: %s (sha256 %.12s) is the policy in force.\n", path, p.Hash)
		return nil
	}
	fmt.Fprintf(w, "%s is not trusted yet: until you trust it, the embedded default policy applies.\n", path)
	fmt.Fprintf(w, "sha256 %s, mode %s, %d rules, %d warnings\n", p.Hash, p.Mode, len(p.Rules), len(p.Warnings))
	if tr.Observe {
		fmt.Fprintln(w, "WARNING: mode: observe — nothing is denied; denials are only logged.")
	}
	printWarnings(w, p)
	fmt.Fprintf(w, "\nChanges against %s:\n%s\n", tr.BaseName, lineDiff(tr.Base, string(content)))
	approved := *yes
	if !approved {
		if !e.isTTY {
			return uerr.New(CodeTrustReviewRequired, "policy not trusted",
				"a project's policy file decides what fluffy may do, so it applies only once you approved it, and there is no terminal to ask on",
				"review the changes above, then run `fluffy policy trust --yes`")
		}
		ans, err := ask(e, "Trust this policy for "+path+"? [y/N] ")
		if err != nil {
			return err
		}
		approved = ans == "y" || ans == "yes"
	}
	if !approved {
		return uerr.New(CodeTrustRejected, "policy not trusted", "you did not approve it", "the embedded default policy stays in force")
	}
	if err := tr.Approve(context.Background()); err != nil {
		return err
	}
	fmt.Fprintf(w, "Trusted: %s (sha256 %.12s) applies now; a running kernel picks it up within a second.\n", path, p.Hash)
	fmt.Fprintln(w, "Edit it through `fluffy policy update FILE`: a change made any other way needs `fluffy policy trust` again.")
	return nil
}

// lineDiff is a line diff of a to b ("-"/"+" lines, unchanged lines as
// "  "), runs of unchanged lines elided; every line is escaped (the file
// is untrusted text).
func lineDiff(a, b string) string {
	x, y := strings.Split(strings.TrimSuffix(a, "\n"), "\n"), strings.Split(strings.TrimSuffix(b, "\n"), "\n")
	ops, err := patch.Align(x, y)
	if err != nil { // too large to align: show it all
		var sb strings.Builder
		for _, l := range y {
			sb.WriteString("+ " + textsafe.Line(l, 300) + "\n")
		}
		return sb.String()
	}
	const ctx = 2
	near := func(k int) bool {
		for d := -ctx; d <= ctx; d++ {
			if k+d >= 0 && k+d < len(ops) && ops[k+d].Kind != ' ' {
				return true
			}
		}
		return false
	}
	var sb strings.Builder
	skipped := 0
	changed := false
	for k, l := range ops {
		if l.Kind != ' ' {
			changed = true
		}
		if !near(k) {
			skipped++
			continue
		}
		if skipped > 0 {
			fmt.Fprintf(&sb, "  … %d unchanged lines\n", skipped)
			skipped = 0
		}
		sb.WriteString(string(l.Kind) + " " + textsafe.Line(l.Line, 300) + "\n")
	}
	if !changed {
		return "  (no line differs)\n"
	}
	if skipped > 0 {
		fmt.Fprintf(&sb, "  … %d unchanged lines\n", skipped)
	}
	return sb.String()
}
