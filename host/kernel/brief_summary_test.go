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
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/task"
)

// bodies records every request body before the summary fake answers it.
type bodies struct {
	next http.Handler
	mu   sync.Mutex
	all  [][]byte
}

func (b *bodies) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	b.mu.Lock()
	b.all = append(b.all, body)
	b.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.next.ServeHTTP(w, r)
}

// The project's AGENTS.md reaches the real provider plugin's first request
// as repository text, and every request after the agent summarised the
// conversation still carries it.
func TestAgentsMDInTheFirstRequestAndAfterASummary(t *testing.T) {
	src := t.TempDir()
	copyTree(t, "../../examples/parseconfig", src)
	const marker = "AGENTS-MARKER: wrap every error with the line number"
	if err := os.WriteFile(filepath.Join(src, "AGENTS.md"), []byte("# How we work\n"+marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &bodies{next: &summaryFake{scripts: openAIScripts(t, "../../examples/cassettes/parseconfig.jsonl")}}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	small := func(o *task.Options) { o.ContextWindow = 1 }
	cfg, _ := json.Marshal(map[string]string{"base_url": srv.URL + "/v1", "api_key": "sk-test-not-a-real-key", "model": "gpt-4.1"})
	_, tasks, _ := projectKernel(t, src, "provider-openai", "gpt-4.1", cfg, small)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var ev events
	done, err := tasks.Run(ctx, task.Request{Prompt: "add error handling to parseConfig", Yes: true}, ev.add)
	if err != nil || done.Status != agent.StatusDone {
		t.Fatalf("%v %+v\ntools: %v", err, done, ev.tools())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.all) == 0 || !bytes.Contains(rec.all[0], []byte(marker)) || !bytes.Contains(rec.all[0], []byte("<<<repository file AGENTS.md>>>")) {
		t.Fatalf("the first request lacks the project's AGENTS.md:\n%.3000s", rec.all[0])
	}
	summarised, after := false, 0
	for _, b := range rec.all {
		if bytes.Contains(b, []byte("You summarize a coding session")) {
			summarised = true
			continue
		}
		if summarised {
			if !bytes.Contains(b, []byte(marker)) {
				t.Fatalf("a request after the summary lost AGENTS.md:\n%.3000s", b)
			}
			after++
		}
	}
	if !summarised || after == 0 {
		t.Fatalf("summarised %v, %d requests after it: the test does not test what it says", summarised, after)
	}
}
