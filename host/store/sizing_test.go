package store

import (
	"testing"

	"github.com/hashicorp/go-hclog"
)

// fluffy's badger is sized for a CLI (an idle kernel under 100 MiB
// resident); the baseline option keeps badger's own defaults.
func TestBadgerSizing(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name string
		o    Options
		max  map[string]int64 // option → largest allowed value
		min  map[string]int64
	}{
		{"cli", Options{Dir: t.TempDir()},
			map[string]int64{"memtable": 8 * mib, "memtables": 2, "blockcache": 4 * mib, "indexcache": 2 * mib, "vlog": 64 * mib, "compactors": 2},
			map[string]int64{"indexcache": 1}},
		{"badger defaults", Options{Dir: t.TempDir(), BadgerDefaults: true}, nil,
			map[string]int64{"memtable": 64 * mib, "memtables": 5, "blockcache": 256 * mib, "vlog": 1024*mib - 1, "compactors": 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Logger = hclog.NewNullLogger()
			bo := badgerOptions(c.o)
			got := map[string]int64{"memtable": bo.MemTableSize, "memtables": int64(bo.NumMemtables), "blockcache": bo.BlockCacheSize,
				"indexcache": bo.IndexCacheSize, "vlog": bo.ValueLogFileSize, "compactors": int64(bo.NumCompactors)}
			for k, v := range c.max {
				if got[k] > v {
					t.Errorf("%s = %d, want at most %d", k, got[k], v)
				}
			}
			for k, v := range c.min {
				if got[k] < v {
					t.Errorf("%s = %d, want at least %d", k, got[k], v)
				}
			}
		})
	}
}
