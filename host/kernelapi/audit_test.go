package kernelapi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// seedLog writes n records to project's audit log, each large enough that
// an export spans several IPC events, and leaves the log open.
func seedLog(t *testing.T, project string, n int) *audit.Log {
	t.Helper()
	l, err := audit.Open(context.Background(), audit.Options{Dir: store.DefaultDir(project)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		ev := audit.Event{Type: audit.EventToolExecute, ToolName: "read_file", SessionID: "s1", Input: strings.Repeat("x", 900)}
		if i%3 == 0 {
			ev = audit.Event{Type: audit.EventPolicyDecision, SyscallType: "fs.write", PolicyDecision: audit.DecisionDenied, DenyReason: "outside workspace", SessionID: "s2"}
		}
		if _, err := l.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "fk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// The audit verbs give the same answers whether the project's kernel
// holds the log (they go over IPC) or none runs (the database is opened
// read-only).
func TestAuditReaderFromKernelAndDatabase(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		kernel bool
	}{{"database", false}, {"kernel", true}} {
		t.Run(c.name, func(t *testing.T) {
			home, project := shortDir(t), t.TempDir()
			l := seedLog(t, project, 600)
			q := daemon.AuditQuery{Types: []string{string(audit.EventPolicyDecision)}, Session: "s2", Limit: 50}
			wantRecs, err := l.Query(ctx, auditFilter(q))
			if err != nil {
				t.Fatal(err)
			}
			wantRep, err := verify(ctx, l, true)
			if err != nil {
				t.Fatal(err)
			}
			wantStats, err := l.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var wantExport bytes.Buffer
			if _, err := l.Export(ctx, &wantExport); err != nil {
				t.Fatal(err)
			}
			if c.kernel {
				d, err := daemon.New(daemon.Options{Home: home, Project: project})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				registerAudit(d, l)
				sctx, stop := context.WithCancel(ctx)
				served := make(chan error, 1)
				go func() { served <- d.Serve(sctx) }()
				t.Cleanup(func() { stop(); <-served; l.Close() })
				waitSocket(t, d.Paths().Socket)
			} else if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			r, err := OpenAudit(ctx, AuditOptions{Home: home, Project: project, Verb: "log"})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.FromKernel() != c.kernel {
				t.Fatalf("answered by the kernel: %v, want %v", r.FromKernel(), c.kernel)
			}
			recs, err := r.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 50 || !reflect.DeepEqual(recs, wantRecs) {
				t.Fatalf("query: %d records, want the %d the log holds", len(recs), len(wantRecs))
			}
			rep, err := r.Verify(ctx, true)
			if err != nil || !rep.OK() || !reflect.DeepEqual(rep, wantRep) {
				t.Fatalf("verify: %+v %v, want %+v", rep, err, wantRep)
			}
			st, err := r.Stats(ctx)
			if err != nil || st.Records != wantStats.Records || !reflect.DeepEqual(st.ByType, wantStats.ByType) {
				t.Fatalf("stats: %+v %v, want %+v", st, err, wantStats)
			}
			var got bytes.Buffer
			n, err := r.Export(ctx, &got)
			// The header line holds the export's time; the records follow.
			if err != nil || n != 600 || !bytes.Equal(afterHeader(got.Bytes()), afterHeader(wantExport.Bytes())) {
				t.Fatalf("export: %d records, %d bytes, %v; want 600 records, %d bytes", n, got.Len(), err, wantExport.Len())
			}
			if c.kernel && wantExport.Len() <= exportChunk {
				t.Fatalf("the export (%d bytes) fits one event: the test does not cover chunking", wantExport.Len())
			}
		})
	}
}

// A project fluffy never ran in has no database: that is said, not an
// empty one created.
func TestAuditReaderWithoutDatabase(t *testing.T) {
	project := t.TempDir()
	_, err := OpenAudit(context.Background(), AuditOptions{Home: shortDir(t), Project: project, Verb: "log"})
	var ue *uerr.Error
	if !errors.As(err, &ue) || ue.Code != "AUDIT_NO_DATABASE" {
		t.Fatalf("err = %v, want AUDIT_NO_DATABASE", err)
	}
	if _, err := os.Stat(store.DefaultDir(project)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a database was created: %v", err)
	}
}

func afterHeader(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return nil
}

func waitSocket(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("no socket at %s", path)
}
