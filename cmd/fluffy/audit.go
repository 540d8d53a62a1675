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

	"github.com/fluffy-waffle/fluffy/atomicfile"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/textsafe"
	"github.com/fluffy-waffle/fluffy/uerr"
)

func runAudit(e *env, args []string) error {
	return subcommands(e, "audit", args, map[string]func(*env, []string) error{
		"log":    auditLog,
		"verify": auditVerify,
		"export": auditExport,
		"stats":  auditStats,
	})
}

// auditFlags are shared by every audit verb.
type auditFlags struct {
	project, db string
}

func (a *auditFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.project, "project", ".", "project directory")
	fs.StringVar(&a.db, "db", "", "database directory (default <project>/.fluffy/db)")
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

func auditLog(e *env, args []string) error {
	fs := flag.NewFlagSet("audit log", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var a auditFlags
	a.register(fs)
	since := fs.String("since", "", "only records at or after this time (RFC 3339, date, or duration ago)")
	until := fs.String("until", "", "only records at or before this time")
	types := fs.String("type", "", "comma-separated event types")
	session := fs.String("session", "", "only records of this session id")
	limit := fs.Int("limit", 50, "show the newest N matching records (0 = all)")
	asJSON := fs.Bool("json", false, "one JSON record per line")
	if err := parseFlags(fs, args); err != nil {
		return usageErr("audit log", err.Error(), "usage: fluffy audit log [--since T] [--until T] [--type a,b] [--session ID] [--limit N] [--json] [--project DIR] [--db DIR]")
	}
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

func auditVerify(e *env, args []string) error {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var a auditFlags
	a.register(fs)
	all := fs.Bool("all", false, "verify every record, not only the tail")
	file := fs.String("file", "", "verify a JSONL export instead of the database")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return usageErr("audit verify", err.Error(), "usage: fluffy audit verify [--all] [--file export.jsonl] [--json] [--project DIR] [--db DIR]")
	}
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

func auditExport(e *env, args []string) error {
	fs := flag.NewFlagSet("audit export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var a auditFlags
	a.register(fs)
	out := fs.String("o", "", "write to this file instead of stdout")
	if err := parseFlags(fs, args); err != nil {
		return usageErr("audit export", err.Error(), "usage: fluffy audit export [-o FILE] [--project DIR] [--db DIR]")
	}
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

func auditStats(e *env, args []string) error {
	fs := flag.NewFlagSet("audit stats", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var a auditFlags
	a.register(fs)
	asJSON := fs.Bool("json", false, "print as JSON")
	if err := parseFlags(fs, args); err != nil {
		return usageErr("audit stats", err.Error(), "usage: fluffy audit stats [--json] [--project DIR] [--db DIR]")
	}
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
