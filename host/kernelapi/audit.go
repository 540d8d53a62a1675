package kernelapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// The audit verbs' answers, named here so that a CLI renders them without
// importing the audit log's package.
type (
	AuditRecord = audit.Record
	AuditReport = audit.Report
	AuditStats  = audit.Stats
)

// exportChunk bounds one AuditChunk event, well under an IPC frame.
const exportChunk = 256 << 10

// auditMethods serve the audit verbs from the log the kernel holds open.
type auditMethods struct{ l *audit.Log }

// registerAudit registers the audit methods of l on d.
func registerAudit(d *daemon.Daemon, l *audit.Log) {
	a := auditMethods{l: l}
	d.Handle(daemon.MethodAuditLog, a.log)
	d.Handle(daemon.MethodAuditVerify, a.verify)
	d.Handle(daemon.MethodAuditExport, a.export)
	d.Handle(daemon.MethodAuditStats, a.stats)
}

func (a auditMethods) log(ctx context.Context, req *ipc.Request) (any, error) {
	var q daemon.AuditQuery
	if err := decodeParams(req, &q); err != nil {
		return nil, err
	}
	recs, err := a.l.Query(ctx, auditFilter(q))
	if recs == nil && err == nil {
		recs = []audit.Record{}
	}
	return recs, err
}

func (a auditMethods) verify(ctx context.Context, req *ipc.Request) (any, error) {
	var p daemon.AuditVerifyParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	return verify(ctx, a.l, p.All)
}

func (a auditMethods) stats(ctx context.Context, req *ipc.Request) (any, error) {
	return a.l.Stats(ctx)
}

func (a auditMethods) export(ctx context.Context, req *ipc.Request) (any, error) {
	w := &chunkWriter{emit: func(b []byte) error { return req.Emit(daemon.AuditChunk{Data: string(b)}) }}
	n, err := a.l.Export(ctx, w)
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		return nil, err
	}
	return daemon.AuditExportResult{Records: n}, nil
}

// chunkWriter sends what is written in pieces of at most exportChunk.
type chunkWriter struct {
	buf  []byte
	emit func([]byte) error
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for len(c.buf) >= exportChunk {
		if err := c.emit(c.buf[:exportChunk]); err != nil {
			return 0, err
		}
		c.buf = append(c.buf[:0], c.buf[exportChunk:]...)
	}
	return len(p), nil
}

func (c *chunkWriter) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.emit(c.buf)
	c.buf = c.buf[:0]
	return err
}

func auditFilter(q daemon.AuditQuery) audit.Filter {
	f := audit.Filter{Since: q.Since, Until: q.Until, SessionID: q.Session, Limit: q.Limit, Newest: true}
	for _, t := range q.Types {
		f.Types = append(f.Types, audit.EventType(t))
	}
	return f
}

// verify checks l's chain. Opening the log already checked the tail and,
// on a break, began a new segment after it; a tail check reports that
// break rather than the clean new segment.
func verify(ctx context.Context, l *audit.Log, all bool) (audit.Report, error) {
	rep, err := l.Verify(ctx, all)
	if err != nil {
		return rep, err
	}
	if st := l.StartupReport(); !all && !st.OK() {
		rep = st
	}
	return rep, nil
}

// AuditOptions name the audit log a CLI command reads.
type AuditOptions struct {
	Home    string
	Project string
	// DB is a database directory given explicitly: it is opened read-only
	// and no kernel is asked. "" is the project's own database.
	DB     string
	Logger hclog.Logger
	// Verb names the command in the no-database error's fix.
	Verb string
}

// AuditReader answers the audit verbs: from the project's running kernel,
// which holds the database, or, when none runs, from the database opened
// read-only (it is never moved, recovered or written, whoever runs the
// command).
type AuditReader struct {
	cl *ipc.Client
	l  *audit.Log
}

// OpenAudit finds the project's kernel, else opens its database. A
// project without a database is an error rather than a silently created
// empty one.
func OpenAudit(ctx context.Context, o AuditOptions) (*AuditReader, error) {
	dir := o.DB
	if dir == "" {
		abs, err := filepath.Abs(o.Project)
		if err != nil {
			return nil, err
		}
		if cl := dialKernel(ctx, o.Home, abs); cl != nil {
			return &AuditReader{cl: cl}, nil
		}
		dir = store.DefaultDir(o.Project)
	}
	// Only a directory that is not there is "no database"; any other error
	// (another user's 0700 directory) is reported by store.Open with its
	// cause.
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, uerr.New("AUDIT_NO_DATABASE", "no audit database at "+dir,
			"fluffy has not run in this project yet, or the path is wrong",
			"run `fluffy audit "+o.Verb+"` inside the project, or pass --project DIR or --db DIR")
	}
	l, err := audit.Open(ctx, audit.Options{Dir: dir, Logger: o.Logger, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return &AuditReader{l: l}, nil
}

// dialKernel connects to the project's kernel; nil when none answers (no
// socket, or a stale one).
func dialKernel(ctx context.Context, home, project string) *ipc.Client {
	sock := daemon.PathsFor(home, project).Socket
	if _, err := os.Stat(sock); err != nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cl, err := ipc.Dial(dctx, sock, 0)
	if err != nil {
		return nil
	}
	return cl
}

// FromKernel reports whether the running kernel answers.
func (r *AuditReader) FromKernel() bool { return r.cl != nil }

// Close ends the connection or closes the database.
func (r *AuditReader) Close() error {
	if r.cl != nil {
		return r.cl.Close()
	}
	return r.l.Close()
}

func (r *AuditReader) call(ctx context.Context, method string, params, out any, onEvent func(json.RawMessage)) error {
	res, err := r.cl.Call(ctx, method, params, onEvent)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(res, out); err != nil {
		return uerr.Wrap(err, "IPC_BAD_RESULT", "the kernel's answer to "+method+" is not valid", err.Error(), "use a fluffy CLI of the same version as the kernel")
	}
	return nil
}

// Query returns the records q selects, oldest first.
func (r *AuditReader) Query(ctx context.Context, q daemon.AuditQuery) ([]audit.Record, error) {
	if r.l != nil {
		return r.l.Query(ctx, auditFilter(q))
	}
	var recs []audit.Record
	return recs, r.call(ctx, daemon.MethodAuditLog, q, &recs, nil)
}

// Verify checks the chain's tail, or every record with all.
func (r *AuditReader) Verify(ctx context.Context, all bool) (audit.Report, error) {
	if r.l != nil {
		return verify(ctx, r.l, all)
	}
	var rep audit.Report
	return rep, r.call(ctx, daemon.MethodAuditVerify, daemon.AuditVerifyParams{All: all}, &rep, nil)
}

// Stats counts the log's records.
func (r *AuditReader) Stats(ctx context.Context) (audit.Stats, error) {
	if r.l != nil {
		return r.l.Stats(ctx)
	}
	var st audit.Stats
	return st, r.call(ctx, daemon.MethodAuditStats, nil, &st, nil)
}

// Export writes every record to w as JSON lines and returns how many.
func (r *AuditReader) Export(ctx context.Context, w io.Writer) (int, error) {
	if r.l != nil {
		return r.l.Export(ctx, w)
	}
	var werr error
	var res daemon.AuditExportResult
	err := r.call(ctx, daemon.MethodAuditExport, nil, &res, func(ev json.RawMessage) {
		var c daemon.AuditChunk
		if werr != nil {
			return
		}
		if werr = json.Unmarshal(ev, &c); werr == nil {
			_, werr = io.WriteString(w, c.Data)
		}
	})
	if werr != nil {
		return 0, werr
	}
	return res.Records, err
}

// VerifyJSONL checks the chain of an export.
func VerifyJSONL(ctx context.Context, rd io.Reader) (audit.Report, error) {
	return audit.VerifyJSONL(ctx, rd)
}
