package sandbox

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// outPage is the allocation unit of the tmpfs behind a container's /out:
// a file takes its size rounded up to it.
const outPage = 4096

// outCopy is what one copy of a sandbox's /out to the host found.
type outCopy struct {
	// used is the space the archive's files take on the tmpfs (sizes
	// rounded up to outPage).
	used    int64
	entries int
	// over: the files need more than limit, or leave less than a page of
	// it free (a write in the sandbox failed with ENOSPC, or would have),
	// or there are more than quotaMaxEntries entries.
	over bool
	// skipped are the entries that are neither a regular file nor a
	// directory (links, devices, FIFOs): never copied.
	skipped []string
}

// copyOut mirrors the tar archive of a sandbox's /out (its top directory
// is the archive's first path component) into hostDir: regular files and
// directories only, every path confined to hostDir (os.Root: no link is
// followed out of it), host entries the archive no longer has removed.
// It writes at most limit bytes of file data: an archive whose files add
// up to more stops the copy with over set, and the caller discards
// hostDir. A file whose size and modification time match the host copy
// is not rewritten.
func copyOut(archive io.Reader, hostDir string, limit int64) (outCopy, error) {
	var res outCopy
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return res, fmt.Errorf("output dir: %w", err)
	}
	defer root.Close()
	seen := map[string]bool{}
	tr := tar.NewReader(archive)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("read /out archive: %w", err)
		}
		rel, ok := outRel(h.Name)
		if !ok {
			res.skipped = append(res.skipped, h.Name)
			continue
		}
		if rel == "" {
			continue // /out itself
		}
		if res.entries++; res.entries > quotaMaxEntries {
			res.over = true
			return res, nil
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(rel, 0o770); err != nil {
				return res, fmt.Errorf("output dir %s: %w", rel, err)
			}
			markSeen(seen, rel)
		case tar.TypeReg:
			// Less than a page left: the tmpfs is full (or the archive is
			// not what the tmpfs holds); nothing more is written.
			res.used += (h.Size + outPage - 1) / outPage * outPage
			if res.used+outPage > limit {
				res.over = true
				return res, nil
			}
			if dir := path.Dir(rel); dir != "." {
				if err := root.MkdirAll(dir, 0o770); err != nil {
					return res, fmt.Errorf("output dir %s: %w", dir, err)
				}
			}
			markSeen(seen, rel)
			if err := writeOutFile(root, rel, h, tr); err != nil {
				return res, err
			}
		default:
			res.skipped = append(res.skipped, rel)
		}
	}
	res.over = res.used+outPage > limit || res.entries > quotaMaxEntries
	if res.over {
		return res, nil
	}
	return res, pruneOut(root, ".", seen)
}

// outRel is an archive entry's path below the archive's top directory,
// refused when it is not a clean relative path.
func outRel(name string) (string, bool) {
	name = strings.TrimSuffix(name, "/")
	_, rel, _ := strings.Cut(name, "/")
	if strings.HasPrefix(name, "/") || (rel != "" && path.Clean(rel) != rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

func markSeen(seen map[string]bool, rel string) {
	for p := rel; p != "." && p != "/"; p = path.Dir(p) {
		seen[p] = true
	}
}

func writeOutFile(root *os.Root, rel string, h *tar.Header, data io.Reader) error {
	if fi, err := root.Lstat(rel); err == nil {
		if fi.Mode().IsRegular() && fi.Size() == h.Size && fi.ModTime().Equal(h.ModTime) {
			return nil
		}
		if !fi.Mode().IsRegular() {
			if err := root.RemoveAll(rel); err != nil {
				return fmt.Errorf("output %s: %w", rel, err)
			}
		}
	}
	mode := fs.FileMode(0o660)
	if h.Mode&0o111 != 0 {
		mode = 0o770
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("output %s: %w", rel, err)
	}
	_, err = io.CopyN(f, data, h.Size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("output %s: %w", rel, err)
	}
	return root.Chtimes(rel, h.ModTime, h.ModTime)
}

// pruneOut removes what is below dir in root and not in seen.
func pruneOut(root *os.Root, dir string, seen map[string]bool) error {
	f, err := root.Open(dir)
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, e := range ents {
		rel := path.Join(dir, e.Name())
		if !seen[rel] {
			if err := root.RemoveAll(rel); err != nil {
				return err
			}
			continue
		}
		if e.IsDir() {
			if err := pruneOut(root, rel, seen); err != nil {
				return err
			}
		}
	}
	return nil
}
