//go:build !race

// Built with task_test.go (its helpers), which the race pass leaves out.

package kernel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// summaryFake is a fake Chat Completions server for a task whose agent
// summarises its history: the agent's summary requests (their system
// prompt asks for a summary) get a summary, every other request the next
// scripted turn, in the wire format of providertest's scripts.
type summaryFake struct {
	mu        sync.Mutex
	scripts   []providertest.Script
	next      int
	summaries int
}

func (f *summaryFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	f.mu.Lock()
	var sc providertest.Script
	if bytes.Contains(body, []byte("You summarize a coding session")) {
		f.summaries++
		sc = providertest.Stream(0, providertest.OpenAIRole,
			providertest.OpenAIText("The user asked for error handling in parseConfig; the assistant read the files and is changing src/config.go."),
			providertest.OpenAIFinish("stop"), providertest.OpenAIUsageChunk(300, 25, 0, 0), providertest.OpenAIDone)
	} else {
		sc = f.scripts[min(f.next, len(f.scripts)-1)]
		f.next++
	}
	f.mu.Unlock()
	for k, v := range sc.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for _, c := range sc.Chunks {
		if _, err := io.WriteString(w, c); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

// TestReplayAfterSummaryWithOpenAI records the parseconfig task through
// provider-openai (in its container, via the proxy) with a context window
// so small that the agent summarises its history on the way, replays the
// cassette through provider-replay in a fresh kernel with the same window,
// and records the replay: it must finish and give the same cassette byte
// for byte (before the fix the summary request was matched against turn 1
// and the replay failed with PROVIDER_REPLAY_MISMATCH).
func TestReplayAfterSummaryWithOpenAI(t *testing.T) {
	fake := &summaryFake{scripts: openAIScripts(t, "../../examples/cassettes/parseconfig.jsonl")}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	small := func(o *task.Options) { o.ContextWindow = 1 } // the history budget's floor: 1000 tokens
	cfg, _ := json.Marshal(map[string]string{"base_url": srv.URL + "/v1", "api_key": "sk-test-not-a-real-key", "model": "gpt-4.1"})
	_, tasks, _ := projectKernel(t, "../../examples/parseconfig", "provider-openai", "gpt-4.1", cfg, small)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	prompt := "add error handling to parseConfig"
	var ev events
	done, err := tasks.Run(ctx, task.Request{Prompt: prompt, Yes: true, Record: true}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != agent.StatusDone {
		t.Fatalf("task ended %s: %s\ntools: %v", done.Status, done.Reason, ev.tools())
	}
	fake.mu.Lock()
	summaries := fake.summaries
	fake.mu.Unlock()
	if summaries == 0 {
		t.Fatal("the agent never summarised: the test does not test what it says")
	}
	recorded := ev.recorded()
	if !strings.Contains(recorded, "Conversation to summarize") {
		t.Fatalf("no summary turn in the cassette:\n%s", recorded)
	}
	t.Logf("%d summary request(s), %d turns recorded", summaries, strings.Count(recorded, "\n"))

	file := filepath.Join(t.TempDir(), "recorded.jsonl")
	if err := os.WriteFile(file, []byte(recorded), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(file)
	rcfg, _ := json.Marshal(map[string]string{"cassette": string(data)})
	_, replayTasks, _ := projectKernel(t, "../../examples/parseconfig", "provider-replay", "replay", rcfg, small)
	var ev2 events
	done2, err := replayTasks.Run(ctx, task.Request{Prompt: prompt, Yes: true, Record: true}, ev2.add)
	if err != nil || done2.Status != agent.StatusDone {
		t.Fatalf("replaying the recording: %v %+v\ntools: %v", err, done2, ev2.tools())
	}
	if again := ev2.recorded(); again != recorded {
		t.Fatalf("the replay's recording differs from the original:\n%s\n---\n%s", again, recorded)
	}
}
