package commit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/fluffy-waffle/fluffy/host/merge"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// FromMerge is the commit request of a finished merge operation: the
// files that landed (conflicts and failures are not committed), each with
// the content the merge wrote, read from the operation's content file and
// checked against the hash the merge recorded — not read back from the
// project, where the user may have edited it since.
func FromMerge(op *merge.Operation, message, authorName, authorEmail string) (Request, error) {
	req := Request{Message: message, AuthorName: authorName, AuthorEmail: authorEmail}
	for _, f := range op.Files {
		if f.Status != merge.FileLanded {
			continue
		}
		if f.Delete {
			req.Files = append(req.Files, File{Path: f.Path, Delete: true})
			continue
		}
		data, err := readBounded(f.Content)
		if err != nil {
			return Request{}, uerr.Wrap(err, CodeBadRequest, fmt.Sprintf("the merged content of %s is not available", f.Path), err.Error(), "commit the merged files with git")
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != f.New {
			return Request{}, uerr.New(CodeBadRequest, fmt.Sprintf("the merged content of %s changed after the merge", f.Path), "its hash is not the one the merge recorded", "commit the merged files with git")
		}
		req.Files = append(req.Files, File{Path: f.Path, Content: data})
	}
	return req, nil
}

func readBounded(p string) ([]byte, error) {
	if p == "" {
		return nil, fmt.Errorf("no content file")
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileBytes)
	}
	return data, nil
}
