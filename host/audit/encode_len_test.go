package audit

import (
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// TestEncodedLen: Append sizes each record's buffer with encodedLen; it must
// equal the real encoding's length (a wrong size would only cost an extra
// allocation, but the test keeps the promise honest), including multi-byte
// varint lengths and metadata.
func TestEncodedLen(t *testing.T) {
	long := strings.Repeat("x", 300)
	huge := strings.Repeat("y", 20000)
	cases := []struct {
		name string
		r    Record
	}{
		{"empty", Record{}},
		{"typical", Record{EventType: EventToolExecute, SyscallType: "fs.read", Caller: "kernel", InputSummary: "read a file",
			Metadata: map[string]string{"path": "/workspace/a.go"}}},
		{"long fields", Record{EventType: EventToolResult, DenyReason: long, OutputSummary: huge, DurationMS: 1 << 40}},
		{"many metadata keys", Record{EventType: EventToolExecute, Metadata: map[string]string{
			"a": "1", "b": long, "c": "", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8", "i": "9", "j": huge, long: "k"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, want := encodedLen(&c.r), len(appendEncoding(nil, &c.r)); got != want {
				t.Fatalf("encodedLen = %d, encoding is %d bytes", got, want)
			}
		})
	}
}

// TestAppendStoresKeyAndValueApart: Append carves a record's key and value
// out of one buffer; the stored record must still read back, verify and
// decode to what Append returned.
func TestAppendStoresKeyAndValueApart(t *testing.T) {
	l := openLog(t, dbDir(t), nil)
	var recs []Record
	for i := 0; i < 50; i++ {
		ev := benchEvent(EventToolExecute)
		ev.Metadata = map[string]string{"i": strings.Repeat("z", i*7), "path": "/w/x.go", "b": "2"}
		r, err := l.Append(t.Context(), ev)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	rep, err := l.Verify(t.Context(), true)
	if err != nil || !rep.OK() || rep.Checked != uint64(len(recs)) {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	dir := l.o.Dir
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	withBadger(t, dir, func(txn *badger.Txn) error {
		for _, want := range recs {
			got, err := decode(getVal(t, txn, want.ID))
			if err != nil {
				t.Fatalf("record %d: %v", want.ID, err)
			}
			if got.ID != want.ID || got.Hash != want.Hash || got.PrevHash != want.PrevHash || got.Metadata["i"] != want.Metadata["i"] {
				t.Fatalf("record %d read back differs: %+v vs %+v", want.ID, got, want)
			}
		}
		return nil
	})
}

// TestEncodingGolden pins the canonical encoding: the hash below was
// computed by the encoder before the allocation-free rewrite (sort.Strings
// over a heap slice), with metadata keys whose order exercises byte-wise
// sorting (upper case, '_', digits, non-ASCII). Stored chains must keep
// verifying, so this hash must never change.
func TestEncodingGolden(t *testing.T) {
	r := Record{ID: 42, Timestamp: 1700000000123, EventType: EventToolExecute, SyscallType: "fs.write", ToolName: "write_file",
		Caller: "tool-fs@1.2.0", SessionID: "s-1", DenyReason: "sk-" + "[REDACTED]", InputSummary: "in", OutputSummary: "out",
		DurationMS: 17, SandboxID: "sb", Metadata: map[string]string{"zeta": "1", "alpha": "2", "Mid": "3", "path": "/w/a.go", "_u": "", "b2": "x", "b10": "y", "é": "z", "a": "w"}}
	r.PrevHash = GenesisHash(1700000000000)
	v := seal(&r, nil)
	if got, want := r.Hash.String(), "13a471e4d6573f8537423c62710c4f3b0b5833b84091c688c845172479e1449e"; got != want || len(v) != 228 {
		t.Fatalf("hash %s (%d bytes), want %s (228 bytes)", got, len(v), want)
	}
}
