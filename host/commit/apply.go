package commit

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

const maxCommitBytes = 1 << 20

// Apply checks the output a VCS plugin left in dir (<out>/commits/<id>/)
// for commit id against req and the project's repository, and applies it:
// objects, branch ref, reflog, index entries of the merged paths. Nothing
// is written unless every check passes. A project without a repository
// gives a skipped Result.
func Apply(ctx context.Context, project, dir, id string, req Request) (Result, error) {
	st, err := open(project)
	if err != nil {
		return Result{}, err
	}
	if st == nil {
		return Result{Skipped: true, Reason: NotRepoReason}, nil
	}
	if !validID(id) {
		return Result{}, refused(CodeRefusedCommitID, fmt.Sprintf("%q is not a commit id", bounded(id)), "a commit id is 40 lowercase hex digits")
	}
	exp, err := st.expected(req)
	if err != nil {
		return Result{}, err
	}
	cid := plumbing.NewHash(id)
	// The commit first: a wrong parent or tree says more than the stray
	// objects that come with it.
	co, cm, err := readCommit(dir, cid)
	if err != nil {
		return Result{}, err
	}
	if err := st.checkCommit(cm, co.data, exp, req); err != nil {
		return Result{}, err
	}
	got, err := readOutput(dir, cid, exp)
	if err != nil {
		return Result{}, err
	}
	if !bytes.Equal(got[cid].data, co.data) {
		return Result{}, refused(CodeRefusedOutput, "the commit changed while it was checked", "the plugin's output is not stable")
	}
	if err := st.checkSummary(dir, id, exp); err != nil {
		return Result{}, err
	}
	// Every object of the new tree must exist after the apply.
	var write []plumbing.Hash
	for _, h := range exp.order {
		_, inOut := got[h]
		inRepo := st.r.Storer.HasEncodedObject(h) == nil
		switch {
		case !inOut && !inRepo:
			return Result{}, refused(CodeRefusedMissing, fmt.Sprintf("the commit's %s %s is missing", exp.objs[h].typ, h), "the plugin's output lacks an object the repository does not have either")
		case inOut && !inRepo:
			write = append(write, h)
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	// Objects first (content-addressed: harmless if the ref update fails),
	// the commit last.
	for _, h := range append(write, cid) {
		o := got[h]
		mo := &plumbing.MemoryObject{}
		mo.SetType(o.typ)
		if _, err := mo.Write(o.data); err != nil {
			return Result{}, repoErr("prepare object "+h.String(), err)
		}
		if mo.Hash() != h {
			return Result{}, refused(CodeRefusedOutput, "object "+h.String()+" does not hash to its name", "its content is not what its name says")
		}
		if _, err := st.r.Storer.SetEncodedObject(mo); err != nil {
			return Result{}, repoErr("write object "+h.String(), err)
		}
	}
	if err := st.moveBranch(cid, cm); err != nil {
		return Result{}, err
	}
	res := Result{Commit: id, Branch: st.branch.String(), Paths: exp.paths, Objects: len(write) + 1}
	if !st.head.IsZero() {
		res.Parent = st.head.String()
	}
	if err := st.updateIndex(exp); err != nil {
		res.Warning = "the commit landed but the index was not updated for the merged paths: " + err.Error()
	}
	return res, nil
}

// readOutput reads the plugin's output directory: only commit.json and
// objects/<2 hex>/<38 hex> regular files, each an expected object with
// exactly the expected content, or the commit itself.
func readOutput(dir string, id plumbing.Hash, exp *expectation) (map[plumbing.Hash]obj, error) {
	bad := func(what, why string) error { return refused(CodeRefusedOutput, what, why) }
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return nil, bad("the plugin left no commit output", fmt.Sprintf("%s is not a directory (%v)", filepath.Base(dir), err))
	}
	top, err := os.ReadDir(dir)
	if err != nil {
		return nil, repoErr("read the plugin's output", err)
	}
	for _, d := range top {
		switch {
		case d.Name() == vcs.CommitFile && d.Type().IsRegular():
		case d.Name() == "objects" && d.IsDir():
		default:
			return nil, bad(fmt.Sprintf("unexpected %q in the plugin's output", bounded(d.Name())), "a commit output holds commit.json and objects/ only, no links")
		}
	}
	got := map[plumbing.Hash]obj{}
	objDir := filepath.Join(dir, "objects")
	fans, err := os.ReadDir(objDir)
	if err != nil {
		return nil, bad("the plugin's output has no objects", err.Error())
	}
	limit := len(exp.objs) + 1
	for _, fan := range fans {
		if !fan.IsDir() || len(fan.Name()) != 2 || !isHex(fan.Name()) {
			return nil, bad(fmt.Sprintf("unexpected %q in objects/", bounded(fan.Name())), "objects/ holds two-hex-digit directories only")
		}
		files, err := os.ReadDir(filepath.Join(objDir, fan.Name()))
		if err != nil {
			return nil, repoErr("read the plugin's output", err)
		}
		for _, f := range files {
			name := fan.Name() + f.Name()
			if !f.Type().IsRegular() || len(name) != 40 || !isHex(name) {
				return nil, bad(fmt.Sprintf("unexpected %q in objects/%s", bounded(f.Name()), fan.Name()), "objects are regular files named by their 40-hex-digit id")
			}
			if len(got) >= limit {
				return nil, refused(CodeRefusedObject, "the plugin's output holds more objects than the commit needs", fmt.Sprintf("at most %d were expected", limit))
			}
			h := plumbing.NewHash(name)
			want, expected := exp.objs[h]
			if !expected && h != id {
				return nil, refused(CodeRefusedObject, fmt.Sprintf("object %s is not part of the commit", h),
					"every object must be a blob or tree of the merged files, or the commit: anything else could rewrite history or smuggle content")
			}
			maxRaw := int64(maxCommitBytes)
			if expected {
				maxRaw = int64(len(want.data))
			}
			o, err := readLoose(filepath.Join(objDir, fan.Name(), f.Name()), maxRaw)
			if err != nil {
				return nil, bad(fmt.Sprintf("object %s cannot be read", h), err.Error())
			}
			if hashOf(o.typ, o.data) != h {
				return nil, bad(fmt.Sprintf("object %s does not hash to its name", h), "its content is not what its name says")
			}
			if expected && (o.typ != want.typ || !bytes.Equal(o.data, want.data)) {
				return nil, refused(CodeRefusedTree, fmt.Sprintf("object %s differs from the merged content", h), "it does not match what the kernel computed")
			}
			got[h] = o
		}
	}
	if _, ok := got[id]; !ok {
		return nil, refused(CodeRefusedMissing, fmt.Sprintf("commit %s is not in the plugin's output", id), "the plugin named a commit it did not write")
	}
	return got, nil
}

// readCommit reads and parses the commit object named id in the output.
func readCommit(dir string, id plumbing.Hash) (obj, *object.Commit, error) {
	hs := id.String()
	p := filepath.Join(dir, "objects", hs[:2], hs[2:])
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		return obj{}, nil, refused(CodeRefusedMissing, fmt.Sprintf("commit %s is not in the plugin's output", id), "the plugin named a commit it did not write as a regular file")
	}
	co, err := readLoose(p, maxCommitBytes)
	if err != nil {
		return obj{}, nil, refused(CodeRefusedOutput, fmt.Sprintf("commit %s cannot be read", id), err.Error())
	}
	if hashOf(co.typ, co.data) != id {
		return obj{}, nil, refused(CodeRefusedOutput, fmt.Sprintf("object %s does not hash to its name", id), "its content is not what its name says")
	}
	if co.typ != plumbing.CommitObject {
		return obj{}, nil, refused(CodeRefusedNotCommit, fmt.Sprintf("object %s is a %s, not a commit", id, co.typ), "the plugin must return a commit")
	}
	mo := &plumbing.MemoryObject{}
	mo.SetType(plumbing.CommitObject)
	_, _ = mo.Write(co.data)
	cm := &object.Commit{}
	if err := cm.Decode(mo); err != nil {
		return obj{}, nil, refused(CodeRefusedNotCommit, fmt.Sprintf("commit %s cannot be parsed", id), err.Error())
	}
	return co, cm, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s)%2 == 0 && bytes.Equal([]byte(s), bytes.ToLower([]byte(s)))
}

// readLoose inflates one loose object whose content may not exceed max.
func readLoose(p string, max int64) (obj, error) {
	f, err := os.Open(p)
	if err != nil {
		return obj{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return obj{}, err
	}
	// zlib never grows data by more than a few bytes per 16 KiB block.
	if fi.Size() > max+max/64+4096 {
		return obj{}, fmt.Errorf("%d bytes on disk for at most %d of content", fi.Size(), max)
	}
	r, err := objfile.NewReader(f)
	if err != nil {
		return obj{}, err
	}
	defer r.Close()
	t, size, err := r.Header()
	if err != nil {
		return obj{}, err
	}
	if size < 0 || size > max {
		return obj{}, fmt.Errorf("declares %d bytes, more than %d", size, max)
	}
	data, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return obj{}, err
	}
	if int64(len(data)) != size {
		return obj{}, fmt.Errorf("declares %d bytes and holds %d", size, len(data))
	}
	return obj{t, data}, nil
}

// checkCommit compares the commit with what was asked: the parent, the
// tree, message and people, and no header the kernel did not expect.
func (st *repo) checkCommit(cm *object.Commit, raw []byte, exp *expectation, req Request) error {
	var want []plumbing.Hash
	if !st.head.IsZero() {
		want = []plumbing.Hash{st.head}
	}
	if !slices.Equal(cm.ParentHashes, want) {
		return refused(CodeRefusedParent, fmt.Sprintf("the commit's parents are %v, not HEAD %s of %s", cm.ParentHashes, st.head, st.branch),
			"fluffy only fast-forwards the current branch by exactly one commit on top of HEAD (if the branch moved meanwhile, merge again)")
	}
	if cm.TreeHash != exp.root {
		return refused(CodeRefusedTree, fmt.Sprintf("the commit's tree %s is not %s", cm.TreeHash, exp.root),
			"the tree must be HEAD's tree with exactly the merged paths replaced by the merged content")
	}
	if cm.Message != normMessage(req.Message) {
		return refused(CodeRefusedMetadata, "the commit's message is not the one asked for", fmt.Sprintf("got %q", bounded(cm.Message)))
	}
	if cm.Author.Name != req.AuthorName || cm.Author.Email != req.AuthorEmail || cm.Committer.Name != req.AuthorName || cm.Committer.Email != req.AuthorEmail {
		return refused(CodeRefusedMetadata, "the commit's author or committer is not the one asked for",
			fmt.Sprintf("got %q <%q> / %q <%q>", bounded(cm.Author.Name), bounded(cm.Author.Email), bounded(cm.Committer.Name), bounded(cm.Committer.Email)))
	}
	if cm.PGPSignature != "" || cm.MergeTag != "" {
		return refused(CodeRefusedMetadata, "the commit carries a signature or merge tag", "fluffy's commits have neither")
	}
	re := &plumbing.MemoryObject{}
	if err := cm.Encode(re); err != nil {
		return refused(CodeRefusedMetadata, "the commit cannot be re-encoded", err.Error())
	}
	rd, _ := re.Reader()
	again, _ := io.ReadAll(rd)
	if !bytes.Equal(again, raw) {
		return refused(CodeRefusedMetadata, "the commit has headers fluffy does not write", "only tree, parent, author, committer and the message are allowed")
	}
	return nil
}

// checkSummary checks commit.json against what the kernel knows.
func (st *repo) checkSummary(dir, id string, exp *expectation) error {
	f, err := os.Open(filepath.Join(dir, vcs.CommitFile))
	if err != nil {
		return refused(CodeRefusedOutput, "the plugin's output has no "+vcs.CommitFile, err.Error())
	}
	defer f.Close()
	var s vcs.CommitOutput
	dec := json.NewDecoder(io.LimitReader(f, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return refused(CodeRefusedOutput, vcs.CommitFile+" is not valid", err.Error())
	}
	parent := ""
	if !st.head.IsZero() {
		parent = st.head.String()
	}
	if s.Commit != id || s.Parent != parent || s.Branch != st.branch.String() || !slices.Equal(s.Paths, exp.paths) {
		return refused(CodeRefusedParent, vcs.CommitFile+" does not describe this commit",
			fmt.Sprintf("it says commit %s, parent %s, branch %s, %d paths", bounded(s.Commit), bounded(s.Parent), bounded(s.Branch), len(s.Paths)))
	}
	return nil
}

// moveBranch fast-forwards the branch from HEAD to id under git's lock
// protocol: create <ref>.lock exclusively, re-check HEAD and the old value,
// write, rename.
func (st *repo) moveBranch(id plumbing.Hash, cm *object.Commit) error {
	refPath := filepath.Join(st.common, filepath.FromSlash(st.branch.String()))
	if err := os.MkdirAll(filepath.Dir(refPath), 0o755); err != nil {
		return repoErr("create the ref directory", err)
	}
	lock := refPath + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return uerr.New(CodeRefLocked, fmt.Sprintf("%s is locked by another git process", st.branch.Short()),
			lock+" exists", "wait for the other git command to finish (or remove the stale lock file), then commit the merged files with git")
	}
	if err != nil {
		return repoErr("lock "+st.branch.String(), err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(lock)
		}
	}()
	// Re-read under the lock: the branch must still be where the commit
	// was checked against, and HEAD must still name it.
	now, err := open(st.project)
	if err != nil {
		return err
	}
	if now == nil || now.branch != st.branch || now.head != st.head {
		return uerr.New(CodeHeadMoved, "the branch moved while the commit was checked", "HEAD or "+st.branch.Short()+" changed meanwhile", "commit the merged files with git, or merge again")
	}
	if _, err := f.WriteString(id.String() + "\n"); err != nil {
		return repoErr("write "+lock, err)
	}
	if err := f.Sync(); err != nil {
		return repoErr("sync "+lock, err)
	}
	if err := f.Close(); err != nil {
		return repoErr("close "+lock, err)
	}
	if err := os.Rename(lock, refPath); err != nil {
		return repoErr("update "+st.branch.String(), err)
	}
	done = true
	st.reflog(id, cm)
	return nil
}

// reflog appends the update to the branch's and HEAD's reflogs, as git
// does when core.logAllRefUpdates is on (the default with a work tree);
// a repository without a logs directory gets none.
func (st *repo) reflog(id plumbing.Hash, cm *object.Commit) {
	if fi, err := os.Stat(filepath.Join(st.common, "logs")); err != nil || !fi.IsDir() {
		return
	}
	first, _, _ := bytes.Cut([]byte(cm.Message), []byte("\n"))
	kind := "commit"
	if st.head.IsZero() {
		kind = "commit (initial)"
	}
	line := fmt.Sprintf("%s %s %s <%s> %d %s\t%s: %s\n", st.head, id, cm.Committer.Name, cm.Committer.Email,
		cm.Committer.When.Unix(), cm.Committer.When.Format("-0700"), kind, first)
	for _, p := range []string{filepath.Join(st.common, "logs", filepath.FromSlash(st.branch.String())), filepath.Join(st.gitDir, "logs", "HEAD")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			continue
		}
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			_, _ = f.WriteString(line)
			f.Close()
		}
	}
}
