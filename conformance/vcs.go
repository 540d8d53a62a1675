package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/fluffy-waffle/fluffy/host/commit"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

func vcsChecks() map[string]checkFunc {
	return map[string]checkFunc{
		"VCS-STATUS-001": checkVCSStatus,
		"VCS-DIFF-001":   checkVCSDiff,
		"VCS-COMMIT-001": checkVCSCommit,
		"VCS-ERROR-001":  checkVCSError,
	}
}

// setupVCS makes the scratch workspace a git repository with one commit.
func (p *probe) setupVCS() error {
	if _, err := exec.LookPath("git"); err != nil {
		p.vcsSetupErr = fmt.Errorf("git is not installed on this machine: %w", err)
		return nil
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "scratch: initial"}} {
		if out, err := p.git(args...); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, out)
		}
	}
	return nil
}

func (p *probe) git(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=conformance", "-c", "user.email=conformance@fluffy.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = p.ws
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (p *probe) vcsBlocked() (outcome, bool) {
	if p.m != nil && p.m.Kind != manifests.KindVCS {
		return na("the plugin is a %s plugin", p.m.Kind), true
	}
	if p.vcsSetupErr != nil {
		return skip("%v", p.vcsSetupErr), true
	}
	return p.blocked()
}

func (p *probe) vcsClient(ctx context.Context, f func(ctx context.Context, c vcs.Client) error) error {
	return p.use(ctx, func(ctx context.Context, raw any) error { return f(ctx, raw.(vcs.Client)) })
}

const vcsChange = "conformance change"

func checkVCSStatus(ctx context.Context, p *probe) outcome {
	if o, stop := p.vcsBlocked(); stop {
		return o
	}
	if err := os.WriteFile(filepath.Join(p.ws, "README.md"), []byte("hello\nworld\n"+vcsChange+"\n"), 0o644); err != nil {
		return fail("setup: %v", err)
	}
	if err := os.WriteFile(filepath.Join(p.ws, "new.txt"), []byte("new file\n"), 0o644); err != nil {
		return fail("setup: %v", err)
	}
	var st vcs.Status
	if err := p.vcsClient(ctx, func(ctx context.Context, c vcs.Client) error {
		var err error
		st, err = c.Status(ctx)
		return err
	}); err != nil {
		return fail("Status failed: %s", errText(err))
	}
	var paths []string
	for _, f := range st.Files {
		paths = append(paths, filepath.ToSlash(f.Path))
	}
	var missing []string
	for _, want := range []string{"README.md", "new.txt"} {
		if !slices.Contains(paths, want) {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		return fail("Status lists %v but misses %v (README.md modified, new.txt untracked)", paths, missing)
	}
	if st.Branch != "main" {
		return fail("Status reports branch %q; the scratch repository is on main", st.Branch)
	}
	return pass("branch %s, %d changed paths", st.Branch, len(st.Files))
}

func checkVCSDiff(ctx context.Context, p *probe) outcome {
	if o, stop := p.vcsBlocked(); stop {
		return o
	}
	var d string
	if err := p.vcsClient(ctx, func(ctx context.Context, c vcs.Client) error {
		var err error
		d, err = c.Diff(ctx, nil, false)
		return err
	}); err != nil {
		return fail("Diff failed: %s", errText(err))
	}
	if !strings.Contains(d, "README.md") || !strings.Contains(d, "+"+vcsChange) || !strings.Contains(d, "@@") {
		return fail("Diff does not show README.md's added line %q as a unified diff:\n%s", vcsChange, textsafe.Cap(d, 400))
	}
	return pass("unified diff of %d bytes", len(d))
}

func checkVCSCommit(ctx context.Context, p *probe) outcome {
	if o, stop := p.vcsBlocked(); stop {
		return o
	}
	files := map[string]string{"README.md": "hello\nworld\n" + vcsChange + "\n", "new.txt": "new file\n"}
	req := commit.Request{Message: "conformance: commit", AuthorName: "Conformance", AuthorEmail: "conformance@fluffy.invalid"}
	for _, name := range []string{"README.md", "new.txt"} {
		if err := os.WriteFile(filepath.Join(p.ws, name), []byte(files[name]), 0o644); err != nil {
			return fail("setup: %v", err)
		}
		req.Files = append(req.Files, commit.File{Path: name, Content: []byte(files[name])})
	}
	before, err := p.git("rev-parse", "HEAD")
	if err != nil {
		return fail("git rev-parse HEAD: %v", err)
	}
	var id, out string
	if err := p.sup.UseVCS(ctx, p.m.Name, func(ctx context.Context, c vcs.Client, outDir string) error {
		var err error
		id, err = c.Commit(ctx, vcs.CommitRequest{Message: req.Message, Paths: []string{"README.md", "new.txt"}, AuthorName: req.AuthorName, AuthorEmail: req.AuthorEmail})
		out = outDir
		return err
	}); err != nil {
		return fail("Commit failed: %s", errText(err))
	}
	if after, _ := p.git("rev-parse", "HEAD"); after != before {
		return fail("Commit wrote the repository itself (HEAD %s → %s); a VCS plugin never writes .git: it leaves the commit in <out>/%s/<id>/ for the kernel to check and apply", textsafe.Cap(before, 12), textsafe.Cap(after, 12), vcs.CommitDir)
	}
	res, err := commit.Apply(ctx, p.ws, filepath.Join(out, vcs.CommitDir, id), id, req)
	if err != nil {
		return fail("the kernel refused the commit output of Commit (returned %q): %s", textsafe.Cap(id, 40), errText(err))
	}
	var log []vcs.LogEntry
	if err := p.vcsClient(ctx, func(ctx context.Context, c vcs.Client) error {
		var err error
		log, err = c.Log(ctx, 1)
		return err
	}); err != nil {
		return fail("Log failed after the commit: %s", errText(err))
	}
	if len(log) == 0 || log[0].Commit != res.Commit || !strings.Contains(log[0].Message, "conformance: commit") {
		return fail("Log(1) after the commit does not show commit %s with its message: %+v", textsafe.Cap(res.Commit, 12), log)
	}
	return pass("commit %s built in /out, accepted and applied by the kernel", textsafe.Cap(res.Commit, 12))
}

func checkVCSError(ctx context.Context, p *probe) outcome {
	if o, stop := p.vcsBlocked(); stop {
		return o
	}
	_ = os.WriteFile(filepath.Join(p.ws, "new.txt"), []byte("changed again\n"), 0o644)
	before, _ := p.git("rev-parse", "HEAD")
	err := p.vcsClient(ctx, func(ctx context.Context, c vcs.Client) error {
		_, err := c.Commit(ctx, vcs.CommitRequest{Message: "  "})
		return err
	})
	after, _ := p.git("rev-parse", "HEAD")
	switch {
	case err == nil:
		return fail("a commit with an empty message was accepted (HEAD %s → %s); refuse it with a structured error", textsafe.Cap(before, 12), textsafe.Cap(after, 12))
	case !isStructured(err):
		return fail("a commit with an empty message failed without a structured error: %s", errText(err))
	case before != after:
		return fail("the commit was refused but HEAD moved")
	}
	return pass("refused: %s", errText(err))
}
