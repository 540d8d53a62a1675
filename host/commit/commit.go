package commit

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// Error codes. Refusals of a plugin's output all start with COMMIT_REFUSED.
const (
	CodeDetached         = "COMMIT_DETACHED_HEAD"
	CodeBadRequest       = "COMMIT_BAD_REQUEST"
	CodeRepo             = "COMMIT_REPOSITORY_ERROR"
	CodeUnsupported      = "COMMIT_UNSUPPORTED_REPOSITORY"
	CodeHeadMoved        = "COMMIT_HEAD_MOVED"
	CodeRefLocked        = "COMMIT_REF_LOCKED"
	CodeRefusedParent    = "COMMIT_REFUSED_PARENT"
	CodeRefusedTree      = "COMMIT_REFUSED_TREE"
	CodeRefusedObject    = "COMMIT_REFUSED_UNEXPECTED_OBJECT"
	CodeRefusedMissing   = "COMMIT_REFUSED_MISSING_OBJECT"
	CodeRefusedOutput    = "COMMIT_REFUSED_OUTPUT"
	CodeRefusedMetadata  = "COMMIT_REFUSED_METADATA"
	CodeRefusedCommitID  = "COMMIT_REFUSED_COMMIT_ID"
	CodeRefusedNotCommit = "COMMIT_REFUSED_NOT_A_COMMIT"
)

// NotRepoReason is Result.Reason when the project has no repository.
const NotRepoReason = "not a git repository: merge done, commit skipped"

// Limits on what one commit may carry.
const (
	MaxFiles     = 10000
	MaxFileBytes = 64 << 20
)

// File is one merged path: its new content, or its deletion.
type File struct {
	Path    string // slash-separated, relative to the project root
	Content []byte
	Delete  bool
}

// Request is the commit of one merge.
type Request struct {
	Message     string
	AuthorName  string
	AuthorEmail string
	Files       []File
}

// Result says what happened to the repository.
type Result struct {
	// Skipped: the project is not a git repository; nothing was committed
	// and Reason says so (NotRepoReason).
	Skipped bool
	Reason  string
	// Commit is the new commit, Parent the branch's previous commit ("" on
	// an unborn branch), Branch the full ref name (refs/heads/main).
	Commit string
	Parent string
	Branch string
	Paths  []string
	// Objects counts the objects written to the repository.
	Objects int
	// Warning is set when the commit landed but the index could not be
	// updated for the merged paths (they then show as staged changes in
	// `git status` until `git reset -q -- <paths>`).
	Warning string
}

// Plugins runs a VCS plugin; host/supervisor.Supervisor implements it.
type Plugins interface {
	UseVCS(ctx context.Context, name string, f func(ctx context.Context, c vcs.Client, outDir string) error) error
}

// Commit commits the merged files of req in the project's repository: it
// checks the repository (not a repository → a skipped Result, no error;
// detached HEAD → CodeDetached), asks VCS plugin `plugin` to build the
// commit, and checks and applies its output with Apply. The output
// directory is removed after a successful apply and kept after a refusal.
func Commit(ctx context.Context, plugins Plugins, plugin, project string, req Request) (Result, error) {
	st, err := open(project)
	if err != nil {
		return Result{}, err
	}
	if st == nil {
		return Result{Skipped: true, Reason: NotRepoReason}, nil
	}
	if _, err := st.expected(req); err != nil {
		return Result{}, err
	}
	paths := make([]string, 0, len(req.Files))
	for _, f := range req.Files {
		paths = append(paths, f.Path)
	}
	var id, out string
	err = plugins.UseVCS(ctx, plugin, func(ctx context.Context, c vcs.Client, outDir string) error {
		var err error
		id, err = c.Commit(ctx, vcs.CommitRequest{Message: req.Message, Paths: paths, AuthorName: req.AuthorName, AuthorEmail: req.AuthorEmail})
		out = outDir
		return err
	})
	if err != nil {
		return Result{}, err
	}
	if !validID(id) {
		return Result{}, refused(CodeRefusedCommitID, fmt.Sprintf("plugin %s answered %q instead of a commit id", plugin, bounded(id)),
			"a commit id is 40 lowercase hex digits")
	}
	dir := filepath.Join(out, vcs.CommitDir, id)
	res, err := Apply(ctx, project, dir, id, req)
	if err == nil {
		_ = os.RemoveAll(dir)
	}
	return res, err
}

func validID(id string) bool {
	if len(id) != 40 || strings.ToLower(id) != id {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// refused is the error for output the kernel does not accept.
func refused(code, what, why string) *uerr.Error {
	return uerr.New(code, what, why, "nothing was written to the repository; the merged files are in the project, uncommitted: commit them with git, or report the VCS plugin if this repeats")
}

// bounded escapes control characters and cuts untrusted text for messages.
func bounded(s string) string {
	const max = 200
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= max {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func repoErr(what string, err error) error {
	var ue *uerr.Error
	if errors.As(err, &ue) {
		return err
	}
	return uerr.Wrap(err, CodeRepo, "could not "+what, err.Error(), "check the repository with `git status` and `git fsck`")
}

// Landed reports whether HEAD already is the commit of req: its tree is
// HEAD's parent's tree with exactly req's files, as a kernel killed after
// moving the ref but before recording it leaves the repository. It then
// returns HEAD's id. Without a repository or a HEAD it reports false.
func Landed(project string, req Request) (string, bool, error) {
	st, err := open(project)
	if err != nil || st == nil || st.head.IsZero() {
		return "", false, err
	}
	head, err := st.r.CommitObject(st.head)
	if err != nil {
		return "", false, repoErr("read HEAD's commit", err)
	}
	// The tree HEAD would get from req equals HEAD's own tree only when
	// req's files are already committed as they are.
	e, err := st.expected(req)
	if err != nil {
		return "", false, err
	}
	if e.root != head.TreeHash || normMessage(head.Message) != normMessage(req.Message) {
		return "", false, nil
	}
	return st.head.String(), true, nil
}
