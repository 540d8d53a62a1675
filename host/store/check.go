package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// corruption is what check found: the damaged files and the first cause.
type corruption struct {
	files []string
	err   error
}

func (c *corruption) Error() string { return c.err.Error() }

// check validates the MANIFEST and every table it names, each in the calling
// goroutine under recover(), so that damage is found before badger opens
// tables in background goroutines where a panic would kill the process.
// Write-ahead logs (.mem) and value logs (.vlog) are not checked here: badger
// truncates them at the first bad entry when it replays them.
//
// A file that cannot be read for an operating-system reason (permissions,
// I/O error) is not evidence of damage: it is returned as the second
// result, and the caller reports it without touching anything.
func check(dir string, bo badger.Options) (*corruption, error) {
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	f, err := os.Open(filepath.Join(dir, "MANIFEST"))
	if errors.Is(err, os.ErrNotExist) {
		if len(ssts) > 0 {
			return &corruption{files: []string{"MANIFEST"}, err: fmt.Errorf("MANIFEST is missing but %d table files exist", len(ssts))}, nil
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, _, err := replayManifest(f, bo)
	f.Close()
	if err != nil {
		if errnoOf(err) != 0 {
			return nil, fmt.Errorf("read MANIFEST: %w", err)
		}
		return &corruption{files: []string{"MANIFEST"}, err: fmt.Errorf("read MANIFEST: %w", err)}, nil
	}
	var bad []string
	var first error
	for id, tm := range m.Tables {
		name := table.NewFilename(id, dir)
		if err := checkTable(name, tm.Compression, bo); err != nil {
			if errnoOf(err) != 0 {
				return nil, fmt.Errorf("table %s: %w", filepath.Base(name), err)
			}
			bad = append(bad, filepath.Base(name))
			if first == nil {
				first = fmt.Errorf("table %s: %w", filepath.Base(name), err)
			}
		}
	}
	if len(bad) == 0 {
		return nil, nil
	}
	sort.Strings(bad)
	return &corruption{files: bad, err: first}, nil
}

func replayManifest(f *os.File, bo badger.Options) (m badger.Manifest, n int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while reading: %v", r)
		}
	}()
	return badger.ReplayManifestFile(f, bo.ExternalMagicVersion, bo)
}

// openTable opens one SST read-only with full checksum verification. The
// caller closes it with closeTable.
func openTable(name string, comp options.CompressionType, bo badger.Options) (t *table.Table, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("unreadable (badger panicked: %v)", r)
		}
	}()
	mf, err := z.OpenMmapFile(name, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("file is missing")
		}
		return nil, err
	}
	t, err = table.OpenTable(mf, table.Options{
		ReadOnly:           true,
		ChkMode:            options.OnTableRead,
		Compression:        comp,
		BlockSize:          bo.BlockSize,
		BloomFalsePositive: bo.BloomFalsePositive,
		TableSize:          uint64(bo.BaseTableSize),
	})
	if err != nil {
		_ = mf.Close(-1)
		return nil, cleanTableErr(err)
	}
	return t, nil
}

func closeTable(t *table.Table) { _ = t.MmapFile.Close(-1) }

func checkTable(name string, comp options.CompressionType, bo badger.Options) error {
	t, err := openTable(name, comp, bo)
	if err != nil {
		return err
	}
	closeTable(t)
	return nil
}

// cleanTableErr trims badger's multi-line stack-bearing errors to one line.
func cleanTableErr(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return errors.New(s[:i])
	}
	return err
}
