package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
)

// cacheProgArg makes this binary the go command's GOCACHEPROG:
// `tool-test __fluffy_gocacheprog <lower> <upper> [<marker> <key>]`.
// lower is the host's Go build cache, mounted read-only; upper is the
// project's own cache, the only one written; key is written to marker
// when the go command closes the session.
const cacheProgArg = "__fluffy_gocacheprog"

// envHostGoCache is where the sandbox mounted the host's build cache
// (sandbox.EnvHostGoCache; this plugin does not import the kernel).
const envHostGoCache = "FLUFFY_HOST_GOCACHE"

// goCacheProg is the GOCACHEPROG value that layers the host's cache
// (read-only) under upper, or "" for a plain GOCACHE: without a host
// cache, or when a layered run of this module already copied what it
// took from the host into upper (its marker holds the key of the same
// go.mod, go.sum and toolchain). A cache program costs a round trip per
// cache lookup, hundreds per run; a plain warm run needs none. The go
// command splits the value on spaces, so paths with blanks or quotes are
// not layered.
func (j *job) goCacheProg(upper string) string {
	lower := os.Getenv(envHostGoCache)
	if lower == "" || !filepath.IsAbs(lower) || upper == "" {
		return ""
	}
	if fi, err := os.Stat(lower); err != nil || !fi.IsDir() {
		return ""
	}
	argv := []string{j.self, cacheProgArg, lower, upper}
	if j.cache != "" {
		if modDir, ok := goModuleDir(j.ws, j.target); ok {
			marker, key := layerMarker(j.cache, filepath.Join(j.ws, filepath.FromSlash(modDir)), modDir, lower)
			if b, err := os.ReadFile(marker); err == nil && string(b) == key {
				return ""
			}
			argv = append(argv, marker, key)
		}
	}
	for _, a := range argv {
		if strings.ContainsAny(a, " \t\n'\"\\") {
			j.logger.Debug("build cache path not usable in GOCACHEPROG; host cache not layered", "path", a)
			return ""
		}
	}
	return strings.Join(argv, " ")
}

// layerMarker is where the module at modDir records its last layered
// run, and the key of what that run resolved against: go.mod, go.sum,
// the go binary and the host cache's path. A new dependency or another
// toolchain changes the key, and the next run is layered again.
func layerMarker(cache, dir, modDir, lower string) (marker, key string) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		fmt.Fprintf(h, "%s %d\n%s\n", f, len(b), b)
	}
	if gobin, err := exec.LookPath("go"); err == nil {
		if fi, err := os.Stat(gobin); err == nil {
			fmt.Fprintf(h, "go %s %d %d\n", gobin, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	fmt.Fprintf(h, "lower %s\n", lower)
	sum := sha256.Sum256([]byte(modDir))
	return filepath.Join(cache, "go-layered", hex.EncodeToString(sum[:8])), hex.EncodeToString(h.Sum(nil))
}

// cacheProgMain serves the GOCACHEPROG protocol on stdin/stdout.
func cacheProgMain(args []string) {
	if len(args) != 2 && len(args) != 4 || !filepath.IsAbs(args[0]) || !filepath.IsAbs(args[1]) {
		fmt.Fprintln(os.Stderr, "usage: tool-test "+cacheProgArg+" <lower cache dir> <upper cache dir> [<marker file> <key>]")
		os.Exit(2)
	}
	c := layeredCache{lower: args[0], upper: args[1]}
	if len(args) == 4 {
		c.marker, c.key = args[2], args[3]
	}
	if err := c.serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fluffy gocacheprog:", err)
		os.Exit(1)
	}
}

// cacheRequest and cacheResponse are cmd/go/internal/cacheprog's Request
// and Response on the wire (JSON lines; a put's body follows its request
// as a base64 JSON string).
type cacheRequest struct {
	ID       int64
	Command  string
	ActionID []byte `json:",omitempty"`
	OutputID []byte `json:",omitempty"`
	BodySize int64  `json:",omitempty"`
}

type cacheResponse struct {
	ID            int64
	Err           string     `json:",omitempty"`
	KnownCommands []string   `json:",omitempty"`
	Miss          bool       `json:",omitempty"`
	OutputID      []byte     `json:",omitempty"`
	Size          int64      `json:",omitempty"`
	Time          *time.Time `json:",omitempty"`
	DiskPath      string     `json:",omitempty"`
}

// layeredCache reads upper, then lower, both in the go command's own
// GOCACHE layout (<2 hex>/<action id>-a entries naming <output id>-d
// files), and writes upper only. Entries are keyed by action ID, a hash
// of everything that went into the action, and the go command checks an
// output against its output ID where it matters, so a lower entry either
// is the right result or is not found.
type layeredCache struct {
	lower, upper string
	// marker, if set, gets key at close: upper then holds everything
	// this session took from lower.
	marker, key string
}

const hashSize = sha256.Size

func (c layeredCache) serve(r io.Reader, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	send := func(res *cacheResponse) error {
		if err := enc.Encode(res); err != nil {
			return err
		}
		return bw.Flush()
	}
	if err := send(&cacheResponse{KnownCommands: []string{"get", "put", "close"}}); err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	for {
		var req cacheRequest
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read request: %w", err)
		}
		res := cacheResponse{ID: req.ID}
		switch req.Command {
		case "get":
			c.get(req.ActionID, &res)
		case "put":
			var body []byte
			if req.BodySize > 0 {
				if err := dec.Decode(&body); err != nil {
					return fmt.Errorf("read body of put %d: %w", req.ID, err)
				}
			}
			if int64(len(body)) != req.BodySize {
				res.Err = fmt.Sprintf("body of %d bytes, announced %d", len(body), req.BodySize)
			} else if err := c.put(req.ActionID, req.OutputID, body, &res); err != nil {
				res.Err = err.Error()
			}
		case "close":
			// The go command trims its cache on exit, but not when a
			// cache program stands in for it.
			c.trim(time.Now())
			if c.marker != "" {
				if err := writeAtomic(c.marker, []byte(c.key)); err != nil {
					res.Err = err.Error()
				}
			}
			return send(&res)
		default:
			res.Err = fmt.Sprintf("unknown command %q", req.Command)
		}
		if err := send(&res); err != nil {
			return err
		}
	}
}

// get answers from upper, else from lower, else a miss. A lower hit is
// copied up (entry and output), so later runs find it in upper alone.
func (c layeredCache) get(id []byte, res *cacheResponse) {
	if len(id) != hashSize {
		res.Err = fmt.Sprintf("action ID of %d bytes", len(id))
		return
	}
	for _, dir := range []string{c.upper, c.lower} {
		out, size, t, ok := readEntry(dir, id)
		if !ok {
			continue
		}
		file, ok := outputFile(dir, out, size)
		if !ok {
			continue
		}
		if dir == c.upper {
			markUsed(cacheFile(dir, id, "a"))
			markUsed(file)
		} else if up, err := c.copyUp(id, out, size, t, file); err == nil {
			file = up
		}
		res.OutputID, res.Size, res.Time, res.DiskPath = out, size, &t, file
		return
	}
	res.Miss = true
}

// put stores body under its output ID and the entry under the action ID,
// in upper, each by rename so a reader never sees half a file.
func (c layeredCache) put(id, out, body []byte, res *cacheResponse) error {
	if len(id) != hashSize || len(out) != hashSize {
		return errors.New("action or output ID is not a SHA-256")
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], out) {
		return errors.New("body does not hash to its output ID")
	}
	file := cacheFile(c.upper, out, "d")
	if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(body)) {
		if err := writeAtomic(file, body); err != nil {
			return err
		}
	}
	entry := fmt.Sprintf("v1 %x %x %20d %20d\n", id, out, len(body), time.Now().UnixNano())
	if err := writeAtomic(cacheFile(c.upper, id, "a"), []byte(entry)); err != nil {
		return err
	}
	res.DiskPath = file
	return nil
}

func cacheFile(dir string, id []byte, kind string) string {
	h := hex.EncodeToString(id)
	return filepath.Join(dir, h[:2], h+"-"+kind)
}

// entryLen is the go command's action entry: "v1 <id> <out> <size> <time>\n"
// with size and time space-padded to 20 bytes.
const entryLen = 2 + 1 + 2*hashSize + 1 + 2*hashSize + 1 + 20 + 1 + 20 + 1

// readEntry parses dir's entry for id as the go command writes it.
func readEntry(dir string, id []byte) (out []byte, size int64, t time.Time, ok bool) {
	f, err := os.Open(cacheFile(dir, id, "a"))
	if err != nil {
		return nil, 0, time.Time{}, false
	}
	defer f.Close()
	b := make([]byte, entryLen+1)
	n, _ := io.ReadFull(f, b)
	if n != entryLen {
		return nil, 0, time.Time{}, false
	}
	fields := strings.Fields(string(b[:n]))
	if len(fields) != 5 || fields[0] != "v1" || fields[1] != hex.EncodeToString(id) || b[n-1] != '\n' {
		return nil, 0, time.Time{}, false
	}
	out, err = hex.DecodeString(fields[2])
	if err != nil || len(out) != hashSize {
		return nil, 0, time.Time{}, false
	}
	size, err1 := strconv.ParseInt(fields[3], 10, 64)
	ns, err2 := strconv.ParseInt(fields[4], 10, 64)
	if err1 != nil || err2 != nil || size < 0 || ns < 0 {
		return nil, 0, time.Time{}, false
	}
	return out, size, time.Unix(0, ns), true
}

// outputFile is dir's file for output out when it has the entry's size.
// A directory holding one file is how the go command caches executables.
func outputFile(dir string, out []byte, size int64) (string, bool) {
	file := cacheFile(dir, out, "d")
	fi, err := os.Stat(file)
	if err == nil && fi.IsDir() {
		ents, err := os.ReadDir(file)
		if err != nil || len(ents) != 1 {
			return "", false
		}
		file = filepath.Join(file, ents[0].Name())
		fi, err = os.Stat(file)
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != size {
		return "", false
	}
	return file, true
}

func writeAtomic(file string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	// A cache: a machine crash may lose an entry, never tear one.
	err := atomicfile.Replace(atomicfile.OS{}, file, 0o644, atomicfile.Options{NoSync: true}, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("cache write %s: %w", file, err)
	}
	return nil
}

// The go command's trimming rules (cmd/go/internal/cache): an entry
// used within trimLimit stays; use is recorded in its mtime at most
// once per mtimeInterval; a trim runs at most once per trimInterval.
const (
	mtimeInterval = time.Hour
	trimInterval  = 24 * time.Hour
	trimLimit     = 5 * 24 * time.Hour
)

// markUsed records a use of an upper file the way the go command does.
func markUsed(file string) {
	now := time.Now()
	if fi, err := os.Stat(file); err == nil && now.Sub(fi.ModTime()) >= mtimeInterval {
		_ = os.Chtimes(file, now, now)
	}
}

// trim removes the upper cache's entries unused for trimLimit, once per
// trimInterval (trim.txt holds the last trim's Unix time, as the go
// command keeps it). Only upper: lower is never written.
func (c layeredCache) trim(now time.Time) {
	stamp := filepath.Join(c.upper, "trim.txt")
	if b, err := os.ReadFile(stamp); err == nil {
		if t, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && now.Sub(time.Unix(t, 0)) < trimInterval {
			return
		}
	}
	cutoff := now.Add(-trimLimit)
	for i := 0; i < 256; i++ {
		sub := filepath.Join(c.upper, fmt.Sprintf("%02x", i))
		ents, err := os.ReadDir(sub)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if n := e.Name(); !strings.HasSuffix(n, "-a") && !strings.HasSuffix(n, "-d") {
				continue
			}
			if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
				_ = os.RemoveAll(filepath.Join(sub, e.Name()))
			}
		}
	}
	_ = writeAtomic(stamp, []byte(strconv.FormatInt(now.Unix(), 10)))
}

// copyUp copies a lower entry and its output into upper, keeping the
// entry's time; it returns the output's path in upper.
func (c layeredCache) copyUp(id, out []byte, size int64, t time.Time, file string) (string, error) {
	dst := cacheFile(c.upper, out, "d")
	if fi, err := os.Stat(dst); err != nil || !fi.Mode().IsRegular() || fi.Size() != size {
		if err := copyAtomic(dst, file, size); err != nil {
			return "", err
		}
	}
	entry := fmt.Sprintf("v1 %x %x %20d %20d\n", id, out, size, t.UnixNano())
	if err := writeAtomic(cacheFile(c.upper, id, "a"), []byte(entry)); err != nil {
		return "", err
	}
	return dst, nil
}

// copyAtomic copies src (size bytes) to dst by rename, in the kernel
// where it can (io.Copy between files is copy_file_range on Linux).
func copyAtomic(dst, src string, size int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	err = atomicfile.Replace(atomicfile.OS{}, dst, 0o644, atomicfile.Options{NoSync: true}, func(w io.Writer) error {
		n, err := io.Copy(w, in)
		if err == nil && n != size {
			err = errors.New("lower output changed size")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("cache copy %s: %w", dst, err)
	}
	return nil
}
