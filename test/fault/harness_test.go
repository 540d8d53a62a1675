package fault

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
	"github.com/fluffy-waffle/fluffy/test/harness"
)

// The scripted model's words, from the harness the e2e suite shares; the
// short name keeps the fault scripts readable.
type call = harness.Call

const wordfreq = `// Package wordfreq counts words.
package wordfreq

import "strings"

// Count returns how often each word occurs in s.
func Count(s string) map[string]int {
	out := map[string]int{}
	for _, w := range strings.Fields(s) {
		out[w]++
	}
	return out
}
`

const wordfreqFixed = `// Package wordfreq counts words.
package wordfreq

import "strings"

// Count returns how often each word occurs in s, ignoring case.
func Count(s string) map[string]int {
	out := map[string]int{}
	for _, w := range strings.Fields(s) {
		out[strings.ToLower(w)]++
	}
	return out
}
`

const caseTest = `package wordfreq

import "testing"

func TestCountIgnoresCase(t *testing.T) {
	if got := Count("Go go GO")["go"]; got != 3 {
		t.Fatalf("Count(\"Go go GO\")[\"go\"] = %d, want 3", got)
	}
}
`

var baseFiles = map[string]string{
	"go.mod":           "module example.com/wordfreq\n\ngo 1.22\n",
	"wordfreq.go":      wordfreq,
	"wordfreq_test.go": "package wordfreq\n\nimport \"testing\"\n\nfunc TestCount(t *testing.T) {\n\tif got := Count(\"a b a\")[\"a\"]; got != 2 {\n\t\tt.Fatalf(\"got %d\", got)\n\t}\n}\n",
}

// goodTask is the whole change, test-first: it ends merged and committed.
func goodTask() [][]provider.Event {
	return harness.Turns([]call{harness.Plan()}, []call{harness.Write("case_test.go", caseTest), harness.TestRun()}, []call{harness.Write("wordfreq.go", wordfreqFixed), harness.TestRun()})
}

// user is a person at a shell in one project and one home, the kernel a
// local process (its pid is the one the test kills) talking to the fake
// provider on the host's loopback.
type user struct {
	t      *testing.T
	fluffy string
	dir    string
	home   string
	env    []string
	srv    *providertest.Server
	// dead are the kernel ids the test killed or cut off from the engine:
	// their containers may outlive them until the next reap.
	dead map[string]bool
}

// newUser writes the project into a fresh git repository under a fresh
// home, with the fake provider playing script.
func newUser(t *testing.T, script [][]provider.Event, extraEnv ...string) *user {
	t.Helper()
	return newUserOn(t, nil, script, extraEnv...)
}

// newUserOn is newUser with the project directory prepared by mount
// (nil: none) before anything is written into it.
func newUserOn(t *testing.T, mount func(dir string), script [][]provider.Event, extraEnv ...string) *user {
	t.Helper()
	// Two faults at a time (-parallel is GOMAXPROCS): most of a fault is
	// waiting on containers, and each has its own home and project.
	t.Parallel()
	harness.NeedDocker(t)
	fluffy := harness.FluffyBin(t, "provider-openai")
	// A short home under /tmp: its unix sockets must fit 108 bytes.
	home, err := os.MkdirTemp("", "ff")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if mount != nil {
		mount(dir)
	}
	srv := providertest.New()
	srv.Play(providertest.OpenAITurns(script)...)
	env := append(os.Environ(), "FLUFFY_HOME="+home, "FLUFFY_L1=none", "FLUFFY_PROVIDER=openai", "FLUFFY_MODEL=gpt-4.1",
		"OPENAI_API_KEY=sk-fault-not-a-real-key", "OPENAI_BASE_URL="+srv.URL()+"/v1")
	u := &user{t: t, fluffy: fluffy, dir: dir, home: home, env: append(env, extraEnv...), srv: srv, dead: map[string]bool{}}
	u.sh().InitRepo(baseFiles)
	t.Cleanup(func() {
		_, _, _ = u.run("kernel", "stop")
		u.removeOwnContainers()
		srv.Close()
		os.RemoveAll(home)
	})
	return u
}

// sh is the user at the shell, as the harness runs commands.
func (u *user) sh() harness.User {
	return harness.User{T: u.t, Fluffy: u.fluffy, Dir: u.dir, Env: u.env}
}

func (u *user) cmd(args ...string) *exec.Cmd { return u.sh().Cmd(args...) }

func (u *user) run(args ...string) (stdout, stderr string, code int) {
	u.t.Helper()
	return u.sh().Run(args...)
}

func (u *user) git(args ...string) string {
	u.t.Helper()
	return u.sh().Git(args...)
}

// task is a --json task run in the background: its output is read once
// it ends.
type task struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	code           int
}

// syncBuffer is written by the command's copier and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitEvent waits until the task printed an event for which match holds;
// it fails the test when the task ends first.
func (tk *task) waitEvent(t *testing.T, d time.Duration, what string, match func(event) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, ev := range tk.events(t) {
			if match(ev) {
				return
			}
		}
		select {
		case <-tk.done:
			t.Fatalf("the task ended before %s: exit %d\nstdout:\n%s\nstderr:\n%s", what, tk.code, harness.Tail(tk.stdout.String(), 3000), tk.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v\nstdout:\n%s", what, d, harness.Tail(tk.stdout.String(), 3000))
		}
	}
}

// executing matches the start of a tool's execution.
func executing(tool string) func(event) bool {
	return func(ev event) bool { return ev.Type == "tool_executing" && ev.Tool != nil && ev.Tool.Name == tool }
}

func (u *user) start(prompt string) *task {
	u.t.Helper()
	tk := &task{cmd: u.cmd("--yes", "--json", prompt), done: make(chan struct{})}
	tk.cmd.Stdout, tk.cmd.Stderr = &tk.stdout, &tk.stderr
	if err := tk.cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	go func() {
		err := tk.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			tk.code = ee.ExitCode()
		}
		close(tk.done)
	}()
	return tk
}

// wait waits for the task's command to end.
func (tk *task) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-tk.done:
	case <-time.After(d):
		_ = tk.cmd.Process.Kill()
		<-tk.done
		t.Fatalf("the task did not end within %v\nstdout:\n%s\nstderr:\n%s", d, harness.Tail(tk.stdout.String(), 3000), harness.Tail(tk.stderr.String(), 3000))
	}
}

// event is the part of a --json event line the suite reads.
type event struct {
	Type string `json:"type"`
	Text string `json:"text"`
	Tool *struct {
		Name       string    `json:"name"`
		TestStatus string    `json:"test_status"`
		Summary    string    `json:"summary"`
		Error      *uerrJSON `json:"error"`
	} `json:"tool"`
	Error *uerrJSON `json:"error"`
	Done  *struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
		Commit string `json:"commit"`
	} `json:"done"`
}

type uerrJSON struct {
	Code string `json:"code"`
	What string `json:"what"`
	Why  string `json:"why"`
	Fix  string `json:"fix"`
}

func (tk *task) events(t *testing.T) []event {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(strings.NewReader(tk.stdout.String()))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// The last line of a running task may still be partial.
			continue
		}
		out = append(out, ev)
	}
	return out
}

// finished is the task's done event (nil when there was none).
func (tk *task) finished(t *testing.T) *event {
	t.Helper()
	evs := tk.events(t)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Done != nil {
			return &evs[i]
		}
	}
	return nil
}

// kernelPID is the pid of the project's kernel, from its lock file.
func (u *user) kernelPID() int {
	u.t.Helper()
	sum := sha256Hex(filepath.Clean(u.dir))
	b, err := os.ReadFile(filepath.Join(u.home, "k", sum[:16]+".lock"))
	if err != nil {
		u.t.Fatalf("no kernel lock: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		u.t.Fatalf("kernel lock holds %q", b)
	}
	return pid
}

// killKernel SIGKILLs the project's kernel and waits until it is gone.
func (u *user) killKernel() {
	u.t.Helper()
	pid := u.kernelPID()
	u.markDead()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		u.t.Fatalf("kill kernel %d: %v", pid, err)
	}
	for i := 0; i < 500 && syscall.Kill(pid, 0) == nil; i++ {
		// A local kernel is the CLI's grandchild (setsid), reaped by init.
		time.Sleep(10 * time.Millisecond)
	}
}

// markDead records the kernels of the home's containers as about to be
// killed or cut off.
func (u *user) markDead() {
	for _, c := range u.containers() {
		f := strings.Split(c, "=")
		u.dead[f[len(f)-1]] = true
	}
}

// containers lists this home's containers (the run directory's owner id
// every sandbox container of a kernel of this home carries as
// io.fluffy.owner) (running or not) with the
// given extra label filters, as id=plugin=kernel.
func (u *user) containers(filters ...string) []string {
	u.t.Helper()
	b, err := os.ReadFile(filepath.Join(u.home, "run", "owner"))
	if os.IsNotExist(err) {
		return nil // no kernel of this home has started a sandbox yet
	}
	args := []string{"ps", "-a", "--format", `{{.ID}}={{.Label "io.fluffy.plugin"}}={{.Label "io.fluffy.kernel"}}`, "--filter", "label=io.fluffy.owner=" + strings.TrimSpace(string(b))}
	for _, f := range filters {
		args = append(args, "--filter", "label="+f)
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		u.t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// removeOwnContainers is the test's last word: whatever a failed test left
// of its own home is removed, never anything else.
func (u *user) removeOwnContainers() {
	b, err := os.ReadFile(filepath.Join(u.home, "run", "owner"))
	if err != nil {
		return
	}
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=io.fluffy.owner="+strings.TrimSpace(string(b))).Output()
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("docker", "rm", "-f", id).Run()
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
