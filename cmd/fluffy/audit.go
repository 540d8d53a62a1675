package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// auditFlags are shared by every audit verb.
type auditFlags struct {
	project, db string
}

func (a *auditFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.project, "project", ".", "`DIR` the project directory")
	fs.StringVar(&a.db, "db", "", "`DIR` the database directory (default <project>/.fluffy/db)")
}

// openAudit reads the project's audit log through its running kernel (it
// holds the database), else from the database opened read-only; --db
// names a database to open directly.
func openAudit(e *env, cmd string, a *auditFlags) (*kernelapi.AuditReader, error) {
	return kernelapi.OpenAudit(context.Background(), kernelapi.AuditOptions{Home: e.home, Project: a.project, DB: a.db, Logger: e.log, Verb: cmd})
}

func parseTimeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return time.Now().Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageErr("audit log", fmt.Sprintf("--%s %q is not a time", name, v),
		"use RFC 3339 (2025-03-01T12:00:00Z), a date (2025-03-01), or a duration back from now (90m, 24h)")
}

func auditLogFlags(e *env, fs *flag.FlagSet) func([]string) error {
	var a auditFlags
	a.register(fs)
	since := fs.String("since", "", "`T` only records at or after T (RFC 3339, a date, or a duration ago such as 2h)")
	until := fs.String("until", "", "`T` only records at or before T")
	types := fs.String("type", "", "`a,b` only these event types")
	session := fs.String("session", "", "`ID` only records of this session")
	limit := fs.Int("limit", 50, "`N` the newest N matching records (0 = all)")
	asJSON := fs.Bool("json", false, "one JSON record per line")
	return func([]string) error { return auditLog(e, a, since, until, types, session, limit, asJSON) }
}

func auditLog(e *env, a auditFlags, since, until, types, session *string, limit *int, asJSON *bool) error {
	if *limit < 0 {
		return usageErr("audit log", "--limit must not be negative", "pass 0 for all records")
	}
	f := daemon.AuditQuery{Session: *session, Limit: *limit}
	var err error
	if f.Since, err = parseTimeFlag("since", *since); err != nil {
		return err
	}
	if f.Until, err = parseTimeFlag("until", *until); err != nil {
		return err
	}
	for _, t := range strings.Split(*types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			f.Types = append(f.Types, t)
		}
	}
	l, err := openAudit(e, "log", &a)
	if err != nil {
		return err
	}
	defer l.Close()
	recs, err := l.Query(context.Background(), f)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(jsonOut{e.stdout})
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tEVENT\tCALLER\tDECISION\tDETAIL")
	for _, r := range recs {
		detail := r.SyscallType
		if r.ToolName != "" {
			detail = strings.TrimSpace(detail + " " + r.ToolName)
		}
		if r.DenyReason != "" {
			detail = strings.TrimSpace(detail + " " + r.DenyReason)
		} else if r.InputSummary != "" {
			detail = strings.TrimSpace(detail + " " + r.InputSummary)
		}
		// Every field a plugin can influence is escaped: a syscall string,
		// a path or a reason must not clear the screen or forge a row.
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Time().Format("2006-01-02 15:04:05"),
			textsafe.Line(string(r.EventType), 40), textsafe.Line(r.Caller, 60), textsafe.Line(r.PolicyDecision, 20), textsafe.Line(detail, 80))
	}
	return tw.Flush()
}

func auditVerifyFlags(e *env, fs *flag.FlagSet) func([]string) error {
	var a auditFlags
	a.register(fs)
	all := fs.Bool("all", false, "verify every record, not only the tail")
	file := fs.String("file", "", "`FILE` verify a JSONL export instead of the database")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	return func([]string) error { return auditVerify(e, a, all, file, asJSON) }
}

func auditVerify(e *env, a auditFlags, all *bool, file *string, asJSON *bool) error {
	var rep kernelapi.AuditReport
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return uerr.Wrap(err, "AUDIT_BAD_EXPORT", "cannot open "+*file, err.Error(), "check the path of the export")
		}
		defer f.Close()
		if rep, err = kernelapi.VerifyJSONL(context.Background(), f); err != nil {
			return err
		}
	} else {
		l, err := openAudit(e, "verify", &a)
		if err != nil {
			return err
		}
		defer l.Close()
		if rep, err = l.Verify(context.Background(), *all); err != nil {
			return err
		}
	}
	if *asJSON {
		if err := json.NewEncoder(jsonOut{e.stdout}).Encode(rep); err != nil {
			return err
		}
	} else {
		scope := "tail"
		if rep.All {
			scope = "all"
		}
		fmt.Fprintf(e.stdout, "checked %d records (%d..%d, %s), %d segment(s)\n", rep.Checked, rep.FromID, rep.ToID, scope, len(rep.Segments))
		quarantined := map[uint64]bool{}
		for _, q := range rep.Quarantines {
			quarantined[q.ID] = true
			fmt.Fprintf(e.stdout, "GAP before record %d: the database was found damaged and moved aside to %s (%s); records not salvaged (%s keys kept) are only there\n",
				q.ID, textsafe.Line(q.MovedTo, 300), textsafe.Line(q.Reason, 300), textsafe.Line(q.SalvagedKeys, 20))
		}
		for _, id := range rep.RecordedBreaks {
			if quarantined[id] {
				continue
			}
			fmt.Fprintf(e.stdout, "earlier break recorded at record %d (see `fluffy audit log --type audit_chain_break`)\n", id)
		}
		for _, b := range rep.Breaks {
			fmt.Fprintf(e.stdout, "BREAK at %d: %s\n", b.ID, textsafe.Line(b.Reason, 400))
		}
		// A deletion is shown as such: "chain OK" never hides that the
		// chain begins after records retention removed.
		if h := rep.Horizon; h != nil {
			switch {
			case h.RecordedBy != 0 && h.FromID != 0:
				fmt.Fprintf(e.stdout, "records %d..%d were removed by retention (%s); stated by record %d\n", h.FromID, h.FirstKept-1, textsafe.Line(h.Reason, 20), h.RecordedBy)
			case h.RecordedBy != 0:
				fmt.Fprintf(e.stdout, "records before %d were removed by retention (%s); stated by record %d\n", h.FirstKept, textsafe.Line(h.Reason, 20), h.RecordedBy)
			case !rep.All:
				fmt.Fprintf(e.stdout, "records before %d were removed by retention (verify --all matches the record stating it)\n", h.FirstKept)
			}
		}
		if rep.OK() && rep.Horizon != nil {
			fmt.Fprintf(e.stdout, "chain OK from record %d (older records removed, see above)\n", rep.Horizon.FirstKept)
		} else if rep.OK() {
			fmt.Fprintln(e.stdout, "chain OK")
		}
	}
	return rep.Err()
}

func auditExportFlags(e *env, fs *flag.FlagSet) func([]string) error {
	var a auditFlags
	a.register(fs)
	out := fs.String("o", "", "`FILE` write to FILE instead of stdout")
	return func([]string) error { return auditExport(e, a, out) }
}

func auditExport(e *env, a auditFlags, out *string) error {
	l, err := openAudit(e, "export", &a)
	if err != nil {
		return err
	}
	defer l.Close()
	if *out == "" {
		_, err = l.Export(context.Background(), e.stdout)
		return err
	}
	var n int
	err = atomicfile.WriteFunc(*out, 0o600, func(w io.Writer) error {
		var err error
		n, err = l.Export(context.Background(), w)
		return err
	})
	var pe *os.PathError
	if errors.As(err, &pe) {
		return uerr.Wrap(err, "AUDIT_EXPORT_FAILED", "cannot write "+*out, err.Error(), "check the directory exists and is writable")
	}
	if err == nil {
		fmt.Fprintf(e.stderr, "exported %d records to %s\n", n, filepath.Clean(*out))
	}
	return err
}

func auditStatsFlags(e *env, fs *flag.FlagSet) func([]string) error {
	var a auditFlags
	a.register(fs)
	asJSON := fs.Bool("json", false, "print as JSON")
	return func([]string) error { return auditStats(e, a, asJSON) }
}

func auditStats(e *env, a auditFlags, asJSON *bool) error {
	l, err := openAudit(e, "stats", &a)
	if err != nil {
		return err
	}
	defer l.Close()
	s, err := l.Stats(context.Background())
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(jsonOut{e.stdout}).Encode(s)
	}
	fmt.Fprintf(e.stdout, "records:  %d (ids %d..%d)\n", s.Records, s.FirstID, s.LastID)
	if s.Records > 0 {
		fmt.Fprintf(e.stdout, "time:     %s .. %s\n", s.FirstTime.Format(time.RFC3339), s.LastTime.Format(time.RFC3339))
	}
	fmt.Fprintf(e.stdout, "size:     %d bytes\nsegments: %d\n", s.Bytes, s.Segments)
	if s.HorizonID > 0 {
		fmt.Fprintf(e.stdout, "retention removed records before id %d\n", s.HorizonID)
	}
	counts := make(map[string]uint64, len(s.ByType))
	types := make([]string, 0, len(s.ByType))
	for t, n := range s.ByType {
		types = append(types, string(t))
		counts[string(t)] = n
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(e.stdout, "  %-24s %d\n", t, counts[t])
	}
	return nil
}
