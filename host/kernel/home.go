package kernel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/diskfree"
)

// homeTailVerify is how many of the newest home audit records each use
// verifies. The log is opened for every registry event, so a whole-log
// check each time would grow with the log; `fluffy audit verify --all
// --db $FLUFFY_HOME/db` checks all of it.
const homeTailVerify = 256

// HomeOptions say who opens the home database: its holder record names
// them when another process has to wait for it.
type HomeOptions struct {
	Logger hclog.Logger
	// Project is the project the opener serves ("" for the plugin CLI).
	Project string
	// Command is what the opener is (e.g. "fluffy kernel").
	Command string
	// Clock and Retention configure the home audit log.
	Clock     audit.Clock
	Retention audit.Retention
	// BadgerDefaults opens the database with badger's default sizes
	// (store.Options.BadgerDefaults; the idle-memory benchmark's baseline).
	BadgerDefaults bool
}

// Home is the shared part of $FLUFFY_HOME: the home database (registry
// records and the home audit log), opened for each operation and closed
// shortly after, so that the kernels of any number of projects and the
// plugin CLI use it side by side (docs/decisions/home-database-sharing.md).
type Home struct {
	DB *store.Shared
	// Audit is the home audit log (registry events).
	Audit *HomeLog
}

// OpenHome prepares the home database of home; nothing is held open until
// it is used.
func OpenHome(home string, o HomeOptions) (*Home, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", home, err)
	}
	if err := diskfree.Ensure(home, 0, "fluffy's home database in "+home); err != nil {
		return nil, err
	}
	db := store.NewShared(store.SharedOptions{Options: store.Options{
		Dir: HomeDB(home), Logger: o.Logger, Label: "home database",
		Holder: store.Holder{Project: o.Project, Command: o.Command}, BadgerDefaults: o.BadgerDefaults,
	}})
	return &Home{DB: db, Audit: &HomeLog{db: db, o: audit.Options{Logger: o.Logger, Clock: o.Clock, Retention: o.Retention, TailVerify: homeTailVerify}}}, nil
}

// Registry is the plugin registry over the home database, recording its
// changes in the home audit log.
func (h *Home) Registry(home string, log hclog.Logger) *registry.Registry {
	return registry.New(h.DB, registry.Options{Home: home, Logger: log, Auditor: h.Audit})
}

// Close lets go of the home database if this process still has it open.
func (h *Home) Close() error { return h.DB.Close() }

// HomeLog is the home audit log, opened on the shared home database for
// each use: every use reads the chain's head afresh under the database's
// lock, so records from every process form one chain.
type HomeLog struct {
	db *store.Shared
	o  audit.Options
}

// With runs fn on the home audit log, open for the duration of the call.
func (h *HomeLog) With(ctx context.Context, fn func(*audit.Log) error) error {
	db, release, err := h.db.Acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	o := h.o
	o.DB = db
	l, err := audit.Open(ctx, o)
	if err != nil {
		return err
	}
	ferr := fn(l)
	if cerr := l.Close(); ferr == nil {
		ferr = cerr
	}
	return ferr
}

// Append records ev (on stable storage when Append returns: the log is
// closed, which writes it).
func (h *HomeLog) Append(ctx context.Context, ev audit.Event) (audit.Record, error) {
	var rec audit.Record
	err := h.With(ctx, func(l *audit.Log) (err error) {
		rec, err = l.Append(ctx, ev)
		return err
	})
	return rec, err
}

// Query reads the records f selects.
func (h *HomeLog) Query(ctx context.Context, f audit.Filter) ([]audit.Record, error) {
	var recs []audit.Record
	err := h.With(ctx, func(l *audit.Log) (err error) {
		recs, err = l.Query(ctx, f)
		return err
	})
	return recs, err
}

// Recent is audit.Log.Recent.
func (h *HomeLog) Recent(ctx context.Context, n int, t audit.EventType) ([]audit.Record, error) {
	return h.Query(ctx, audit.Filter{Types: []audit.EventType{t}, Limit: n, Newest: true})
}

// ApplyRetention is audit.Log.ApplyRetention.
func (h *HomeLog) ApplyRetention(ctx context.Context) (audit.RetentionReport, error) {
	var rep audit.RetentionReport
	err := h.With(ctx, func(l *audit.Log) (err error) {
		rep, err = l.ApplyRetention(ctx)
		return err
	})
	return rep, err
}

// RecordPluginEvent implements registry.Auditor.
func (h *HomeLog) RecordPluginEvent(ctx context.Context, event string, rec registry.Record, security bool) error {
	return h.With(ctx, func(l *audit.Log) error {
		return Auditor{Log: l, Logger: h.o.Logger}.RecordPluginEvent(ctx, event, rec, security)
	})
}

// HomeDB is the badger directory under $FLUFFY_HOME.
func HomeDB(home string) string { return filepath.Join(home, "db") }
