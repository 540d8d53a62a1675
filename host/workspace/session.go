package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Error codes.
const (
	CodeSessionInvalid = "WORKSPACE_SESSION_INVALID"
	CodeIO             = "WORKSPACE_IO"
)

// Options are a session's dependencies.
type Options struct {
	// Home is $FLUFFY_HOME; session data lives in SessionDir(Home, Project, id).
	Home string
	// Project is the project root. It is never written.
	Project string
	// Judge is the policy deciding what each plugin may read.
	Judge Judge
	// Reader is the uid/gid sandboxed plugins read their views as.
	Reader Identity
	// DB is the project database the changeset is kept in (under
	// store.PrefixChanges). Nil keeps it in memory only: it is lost when
	// the kernel stops.
	DB *store.DB
	// Identify says who a plugin is to the policy when its writes are
	// judged again at ingest. Nil judges them as an untagged tool plugin
	// outside any sandbox.
	Identify Identify
	// Limits bound one call's proposed changes.
	Limits Limits
	Logger hclog.Logger
	Now    func() time.Time
}

// Session is one session's workspace. It is safe for concurrent use.
type Session struct {
	id      string
	dir     string
	o       Options
	log     hclog.Logger
	project *confine.Root

	// ingestMu serializes changeset updates (Ingest, Discard) so that
	// each judges staleness against the result of the previous one.
	ingestMu sync.Mutex

	mu      sync.Mutex
	views   map[string]*view
	ov      overlay
	changes map[string]Change
}

var sessionIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// SessionsDir is where every session's data lives under $FLUFFY_HOME.
func SessionsDir(home string) string { return filepath.Join(home, "sessions") }

// SessionDir is where session id of project keeps its data:
// $FLUFFY_HOME/sessions/<project key>/<id>. Session ids are per project
// (every project's first one is "kernel"), so the directory is keyed by
// the project too: the kernels of two projects must never share views or
// blobs.
func SessionDir(home, project, id string) string {
	return filepath.Join(SessionsDir(home), ProjectKey(project), id)
}

// ProjectKey names project under $FLUFFY_HOME/sessions: the first 16 hex
// digits of the sha256 of its absolute path with links resolved.
func ProjectKey(project string) string {
	p, err := filepath.Abs(project)
	if err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
	}
	return sum([]byte(p))[:16]
}

// Open opens (creating if needed) session id's workspace.
func Open(ctx context.Context, id string, o Options) (*Session, error) {
	if !sessionIDRe.MatchString(id) {
		return nil, uerr.New(CodeSessionInvalid, fmt.Sprintf("session id %q cannot name a directory", id),
			"a session id is 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", "use a generated session id")
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Judge == nil {
		return nil, fmt.Errorf("workspace: no policy given")
	}
	proj, err := confine.OpenRoot(o.Project)
	if err != nil {
		return nil, uerr.Wrap(err, CodeIO, "cannot open the project "+o.Project, err.Error(), "check that the project directory exists and is readable")
	}
	s := &Session{id: id, dir: SessionDir(o.Home, o.Project, id), o: o, log: o.Logger.Named("workspace"), project: proj, views: map[string]*view{}}
	for _, d := range []string{SessionsDir(o.Home), filepath.Dir(s.dir), s.dir} {
		if err := mkdirPrivate(d); err != nil {
			proj.Close()
			return nil, err
		}
	}
	for _, d := range []string{s.blobDir(), s.viewsDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			proj.Close()
			return nil, uerr.Wrap(err, CodeIO, "cannot create session directory "+d, err.Error(), "check free disk space and the permissions of $FLUFFY_HOME")
		}
	}
	if err := s.loadChanges(); err != nil {
		proj.Close()
		return nil, err
	}
	return s, nil
}

// mkdirPrivate creates d (0700) and refuses a symlink in its place, so that
// a planted link cannot redirect session data.
func mkdirPrivate(d string) error {
	if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
		return uerr.Wrap(err, CodeIO, "cannot create "+d, err.Error(), "check free disk space and the permissions of $FLUFFY_HOME")
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return uerr.Wrap(err, CodeIO, "cannot use "+d, err.Error(), "check the permissions of $FLUFFY_HOME")
	}
	if !fi.IsDir() {
		return uerr.New(CodeIO, d+" is not a directory", "session data must be a real directory (a symlink there is refused)", "remove "+d+" and start again")
	}
	return nil
}

// ID is the session id.
func (s *Session) ID() string { return s.id }

// Dir is SessionDir($FLUFFY_HOME, project, id).
func (s *Session) Dir() string { return s.dir }

// Project is the project root.
func (s *Session) Project() string { return s.o.Project }

func (s *Session) blobDir() string  { return filepath.Join(s.dir, "blobs") }
func (s *Session) viewsDir() string { return filepath.Join(s.dir, "views") }

// ViewDir is the stable host path of plugin's view: what its sandbox
// mounts read-only as /workspace. Its contents change (Prepare); the
// directory itself never does, so a running sandbox keeps seeing it.
func (s *Session) ViewDir(plugin string) (string, error) {
	if err := confine.Name(plugin); err != nil {
		return "", err
	}
	return filepath.Join(s.viewsDir(), plugin), nil
}

// View is a prepared view.
type View struct {
	// Dir is the host directory to mount read-only as /workspace.
	Dir   string
	Stats RefreshStats
}

// Prepare brings the view of r's plugin up to date (creating it on first
// use) and returns it. Call it before every plugin call of the session:
// only what changed since the last call is touched.
func (s *Session) Prepare(ctx context.Context, r Reader) (View, error) {
	dir, err := s.ViewDir(r.Caller.Plugin)
	if err != nil {
		return View{}, err
	}
	s.mu.Lock()
	v := s.views[r.Caller.Plugin]
	if v == nil {
		if v, err = newView(dir, s.project, s.blobDir(), s.o.Reader, s.o.Now); err != nil {
			s.mu.Unlock()
			return View{}, uerr.Wrap(err, CodeIO, "cannot create the view of "+r.Caller.Plugin, err.Error(), "check free disk space under $FLUFFY_HOME")
		}
		s.views[r.Caller.Plugin] = v
	}
	s.mu.Unlock()

	st, err := s.refreshShared(ctx, v, r)
	if err != nil {
		return View{}, uerr.Wrap(err, CodeIO, "cannot refresh the view of "+r.Caller.Plugin, err.Error(), "check free disk space under $FLUFFY_HOME")
	}
	s.log.Debug("view refreshed", "plugin", r.Caller.Plugin, "scanned", st.DirsScanned, "linked", st.Linked, "copied", st.Copied, "removed", st.Removed, "took", st.Duration)
	return View{Dir: dir, Stats: st}, nil
}

// refreshGroup is one view refresh that callers arriving before it starts
// share.
type refreshGroup struct {
	key  string
	done chan struct{}
	st   RefreshStats
	err  error
}

// refreshShared brings v up to date for r. Refreshes of one view run one
// at a time (under v.mu); the callers that arrive while one runs wait for
// it and then share a single next refresh, which starts after all of them
// arrived and reads the changeset and the policy then — so each caller
// still gets a view at least as new as its call, and ten parallel calls
// to one plugin cost two refreshes instead of ten in a row.
func (s *Session) refreshShared(ctx context.Context, v *view, r Reader) (RefreshStats, error) {
	key := r.key("")
	for {
		v.gmu.Lock()
		if g := v.next; g != nil && g.key == key {
			v.gmu.Unlock()
			select {
			case <-g.done:
			case <-ctx.Done():
				return RefreshStats{}, ctx.Err()
			}
			if g.err != nil && ctx.Err() == nil && (errors.Is(g.err, context.Canceled) || errors.Is(g.err, context.DeadlineExceeded)) {
				continue // the caller that ran it gave up; this one did not
			}
			return g.st, g.err
		}
		g := &refreshGroup{key: key, done: make(chan struct{})}
		v.next = g
		v.gmu.Unlock()

		v.mu.Lock()
		v.gmu.Lock()
		if v.next == g {
			v.next = nil // from here on, callers wait for the refresh after this one
		}
		v.gmu.Unlock()
		s.mu.Lock()
		ov := s.ov
		s.mu.Unlock()
		g.st, g.err = v.refresh(ctx, newFilter(s.o.Judge, r), ov)
		v.mu.Unlock()
		close(g.done)
		return g.st, g.err
	}
}

// ViewRoot opens plugin's view as a confinement root, for the kernel's
// reads on the plugin's behalf: it holds exactly what the plugin may see.
func (s *Session) ViewRoot(plugin string) (*confine.Root, error) {
	dir, err := s.ViewDir(plugin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dir); err != nil {
		return nil, uerr.Wrap(err, CodeIO, "plugin "+plugin+" has no view yet", err.Error(), "the view is prepared before the plugin's first call")
	}
	return confine.OpenRoot(dir)
}

// Close releases the session's handles; its data stays for a later Open.
func (s *Session) Close() error { return s.project.Close() }

// Remove closes the session and deletes its data under $FLUFFY_HOME.
func (s *Session) Remove() error {
	_ = s.Discard()
	_ = s.Close()
	return os.RemoveAll(s.dir)
}
