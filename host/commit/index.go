package commit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// updateIndex points the index entries of the merged paths at the
// committed blobs (a deletion removes the entry), under index.lock, and
// leaves every other entry as it was: the user's staged changes stay
// staged. Stat data is filled only when the working tree file holds the
// committed content, so git re-reads any file changed since the merge.
// The cache-tree extension is dropped (go-git writes no extensions): git
// rebuilds it.
func (st *repo) updateIndex(exp *expectation) error {
	idxPath := filepath.Join(st.gitDir, "index")
	lock := idxPath + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists (another git command is running)", lock)
	}
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(lock)
		}
	}()
	idx := &index.Index{Version: 2}
	if cur, err := os.Open(idxPath); err == nil {
		err = index.NewDecoder(bufio.NewReader(cur)).Decode(idx)
		cur.Close()
		if err != nil {
			return fmt.Errorf("read the index: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	idx.Cache, idx.ResolveUndo, idx.EndOfIndexEntry = nil, nil, nil
	for _, p := range exp.paths {
		// Drop every stage of the path (a resolved conflict included).
		kept := idx.Entries[:0]
		for _, e := range idx.Entries {
			if e.Name != p {
				kept = append(kept, e)
			}
		}
		idx.Entries = kept
		if exp.files[p].Delete {
			continue
		}
		e := &index.Entry{Name: p, Hash: exp.blobs[p], Mode: exp.modes[p]}
		if fi, err := os.Lstat(filepath.Join(st.project, filepath.FromSlash(p))); err == nil && fi.Mode().IsRegular() {
			if same, err := fileBlob(filepath.Join(st.project, filepath.FromSlash(p)), fi.Size()); err == nil && same == exp.blobs[p] {
				fillStat(e, fi)
			}
		}
		idx.Entries = append(idx.Entries, e)
	}
	if idx.Version < 2 {
		idx.Version = 2
	}
	w := bufio.NewWriter(f)
	if err := index.NewEncoder(w).Encode(idx); err != nil {
		return fmt.Errorf("write the index: %w", err)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(lock, idxPath); err != nil {
		return err
	}
	ok = true
	return nil
}

// fileBlob is the blob id of a working tree file.
func fileBlob(p string, size int64) (h plumbing.Hash, err error) {
	if size > MaxFileBytes {
		return h, fmt.Errorf("too large")
	}
	f, err := os.Open(p)
	if err != nil {
		return h, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return h, err
	}
	return hashOf(plumbing.BlobObject, data), nil
}
