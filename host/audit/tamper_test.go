package audit

import (
	"context"
	"strconv"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func getVal(t *testing.T, txn *badger.Txn, id uint64) []byte {
	t.Helper()
	item, err := txn.Get(recKey(id))
	if err != nil {
		t.Fatalf("get record %d: %v", id, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTamperIsFoundAtTheFirstBadID edits the stored bytes of real badger
// files and checks that verification names the first bad id, that startup
// records it as audit_chain_break and begins a new segment, and that the
// next startup does not report the same break again.
func TestTamperIsFoundAtTheFirstBadID(t *testing.T) {
	cases := []struct {
		name    string
		tamper  func(t *testing.T, txn *badger.Txn)
		firstID uint64
	}{
		{"flip a byte in the body", func(t *testing.T, txn *badger.Txn) {
			v := getVal(t, txn, 37)
			v[len(v)/2] ^= 0x01
			must(t, txn.Set(recKey(37), v))
		}, 37},
		{"flip a byte in the id", func(t *testing.T, txn *badger.Txn) {
			v := getVal(t, txn, 12)
			v[8] ^= 0x40
			must(t, txn.Set(recKey(12), v))
		}, 12},
		{"flip a byte in the stored hash", func(t *testing.T, txn *badger.Txn) {
			v := getVal(t, txn, 80)
			v[len(v)-1] ^= 0xff
			must(t, txn.Set(recKey(80), v))
		}, 80},
		{"flip a byte in prev_hash", func(t *testing.T, txn *badger.Txn) {
			v := getVal(t, txn, 55)
			v[20] ^= 0x10
			must(t, txn.Set(recKey(55), v))
		}, 55},
		{"truncate a record", func(t *testing.T, txn *badger.Txn) {
			v := getVal(t, txn, 64)
			must(t, txn.Set(recKey(64), v[:20]))
		}, 64},
		{"delete a record", func(t *testing.T, txn *badger.Txn) {
			must(t, txn.Delete(recKey(50)))
		}, 50},
		{"delete a run of records", func(t *testing.T, txn *badger.Txn) {
			for id := uint64(20); id <= 29; id++ {
				must(t, txn.Delete(recKey(id)))
			}
		}, 20},
		{"delete the newest record", func(t *testing.T, txn *badger.Txn) {
			must(t, txn.Delete(recKey(100)))
		}, 100},
		{"reorder two records", func(t *testing.T, txn *badger.Txn) {
			a, b := getVal(t, txn, 70), getVal(t, txn, 71)
			must(t, txn.Set(recKey(70), b))
			must(t, txn.Set(recKey(71), a))
		}, 70},
		{"rewrite a record with a fresh hash", func(t *testing.T, txn *badger.Txn) {
			r, err := decode(getVal(t, txn, 90))
			must(t, err)
			r.PolicyDecision = DecisionAllowed
			must(t, txn.Set(recKey(90), seal(&r, nil)))
		}, 91},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := dbDir(t)
			l := openLog(t, dir, nil)
			appendN(t, l, 100, EventPolicyDecision)
			must(t, l.Close())

			withBadger(t, dir, func(txn *badger.Txn) error { c.tamper(t, txn); return nil })

			l = openLog(t, dir, nil)
			st := l.StartupReport()
			if st.OK() || st.FirstBad() != c.firstID {
				t.Fatalf("startup tail check: first bad %d (%+v), want %d", st.FirstBad(), st.Breaks, c.firstID)
			}
			if err := st.Err(); !uerr.HasCode(err, CodeChainBreak) {
				t.Fatalf("Report.Err = %v, want %s", err, CodeChainBreak)
			}
			rep, err := l.Verify(ctx, true)
			must(t, err)
			if rep.FirstBad() != c.firstID {
				t.Fatalf("Verify(all) first bad = %d (%+v), want %d", rep.FirstBad(), rep.Breaks, c.firstID)
			}
			brk, err := l.Recent(ctx, 1, EventAuditChainBreak)
			must(t, err)
			if len(brk) != 1 || brk[0].Metadata[MetaFirstBad] != strconv.FormatUint(c.firstID, 10) || !isGenesis(&brk[0]) {
				t.Fatalf("no audit_chain_break segment start naming %d: %+v", c.firstID, brk)
			}
			// The new segment is valid and startup is not blocked.
			if _, err := l.Append(ctx, Event{Type: EventKernelStart}); err != nil {
				t.Fatal(err)
			}
			must(t, l.Close())

			l = openLog(t, dir, nil)
			defer l.Close()
			if !l.StartupReport().OK() {
				t.Fatalf("second startup re-reports the old break: %+v", l.StartupReport())
			}
			brks, err := l.Query(ctx, Filter{Types: []EventType{EventAuditChainBreak}})
			must(t, err)
			if len(brks) != 1 {
				t.Fatalf("%d audit_chain_break records after two startups, want 1", len(brks))
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
