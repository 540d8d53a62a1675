package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Bits of badger's per-entry meta byte (badger/value.go, unexported there).
const (
	bitDelete       byte = 1 << 0
	bitValuePointer byte = 1 << 1
)

// internalPrefix marks badger's own keys, which are never salvaged.
const internalPrefix = "!badger!"

// recoverDB quarantines the damaged directory and builds a fresh database
// from what is still readable: the write-ahead logs (newest data) are carried
// over for badger to replay, then every key of every readable table is copied
// in unless the logs hold a newer version of it.
func recoverDB(ctx context.Context, o Options, bo badger.Options, cause *uerr.Error, c *corruption) (*DB, error) {
	at := o.Now()
	q := fmt.Sprintf("%s.corrupt-%s", o.Dir, at.UTC().Format("20060102T150405.000000000Z"))
	if err := os.Rename(o.Dir, q); err != nil {
		return nil, uerr.Wrap(err, CodeCorrupt, "the project database is damaged and could not be moved aside",
			cause.Why+"; rename failed: "+err.Error(), "move "+o.Dir+" away by hand; fluffy then starts with an empty database")
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, uerr.Wrap(err, CodeOpen, "cannot create a fresh database directory "+o.Dir, err.Error(), "check the permissions of the .fluffy directory")
	}
	rec := &Recovery{Cause: cause, Quarantine: q, BadFiles: c.files, At: at}

	mems, _ := filepath.Glob(filepath.Join(q, "*.mem"))
	sort.Strings(mems)
	for _, m := range mems {
		if err := sparseCopy(m, filepath.Join(o.Dir, filepath.Base(m))); err != nil {
			o.Logger.Warn("could not carry over write-ahead log", "file", m, "error", err)
			continue
		}
		rec.WALsKept++
	}
	bdb, err := openBadger(bo)
	if err != nil && rec.WALsKept > 0 {
		o.Logger.Warn("write-ahead logs of the damaged database are unusable; starting without them", "error", err)
		rec.BadFiles = append(rec.BadFiles, "*.mem")
		rec.WALsKept = 0
		if rerr := os.RemoveAll(o.Dir); rerr == nil {
			_ = os.MkdirAll(o.Dir, 0o700)
		}
		bdb, err = openBadger(bo)
	}
	if err != nil {
		return nil, uerr.Wrap(err, CodeOpen, "cannot create a fresh project database in "+o.Dir, err.Error(), "check free disk space and permissions")
	}
	n, err := salvageTables(ctx, q, bo, bdb, o)
	rec.SalvagedKeys = n
	if err != nil {
		o.Logger.Error("salvage stopped early", "error", err)
	}
	o.Logger.Warn("database recovered", "quarantine", q, "bad_files", rec.BadFiles,
		"salvaged_keys", n, "wals_kept", rec.WALsKept)
	return &DB{bdb: bdb, dir: o.Dir, log: o.Logger, recovery: rec}, nil
}

type salvaged struct {
	version uint64
	meta    byte
	user    byte
	value   []byte
}

func salvageTables(ctx context.Context, q string, bo badger.Options, dst *badger.DB, o Options) (int, error) {
	// Keys the carried-over logs hold (tombstones included) are newer than
	// anything in a table and win.
	inWAL := map[string]bool{}
	err := dst.View(func(txn *badger.Txn) error {
		iopt := badger.DefaultIteratorOptions
		iopt.AllVersions, iopt.PrefetchValues = true, false
		it := txn.NewIterator(iopt)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			inWAL[string(it.Item().Key())] = true
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("list keys of carried-over logs: %w", err)
	}
	best := map[string]salvaged{}
	ssts, _ := filepath.Glob(filepath.Join(q, "*.sst"))
	sort.Strings(ssts)
	for _, name := range ssts {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		got, err := readTable(name, bo, best)
		if err != nil {
			o.Logger.Warn("table not salvaged", "file", filepath.Base(name), "error", err, "keys_read", got)
		}
	}
	keys := make([]string, 0, len(best))
	for k, v := range best {
		if inWAL[k] || v.meta&bitDelete != 0 || v.meta&bitValuePointer != 0 {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	wb := dst.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		v := best[k]
		if err := wb.SetEntry(badger.NewEntry([]byte(k), v.value).WithMeta(v.user)); err != nil {
			return 0, fmt.Errorf("write salvaged key: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, fmt.Errorf("write salvaged keys: %w", err)
	}
	if err := dst.Sync(); err != nil {
		return 0, fmt.Errorf("sync salvaged keys: %w", err)
	}
	return len(keys), nil
}

// readTable adds the newest version of every key in one table to best. A
// table that cannot be opened (or panics midway) contributes what was read.
func readTable(name string, bo badger.Options, best map[string]salvaged) (n int, err error) {
	var t *table.Table
	for _, comp := range []options.CompressionType{bo.Compression, options.None, options.Snappy, options.ZSTD} {
		if t, err = openTable(name, comp, bo); err == nil {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	defer closeTable(t)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while reading: %v", r)
		}
	}()
	it := t.NewIterator(0)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		full := it.Key()
		k := y.ParseKey(full)
		if bytes.HasPrefix(k, []byte(internalPrefix)) {
			continue
		}
		ver := y.ParseTs(full)
		if cur, ok := best[string(k)]; ok && cur.version >= ver {
			continue
		}
		vs := it.ValueCopy()
		best[string(k)] = salvaged{version: ver, meta: vs.Meta, user: vs.UserMeta, value: vs.Value}
		n++
	}
	return n, nil
}

// sparseCopy copies a (mostly preallocated, zero-filled) log file without
// materialising its holes.
func sparseCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if !allZero(buf[:n]) {
				if _, err := out.WriteAt(buf[:n], off); err != nil {
					out.Close()
					return err
				}
			}
			off += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
	if err := out.Truncate(fi.Size()); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
