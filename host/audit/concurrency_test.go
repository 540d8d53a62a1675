package audit

import (
	"context"
	"sync"
	"testing"
)

// TestConcurrentAppendersKeepOneChain: 16 goroutines × 10 000 appends, mixed
// security and operational events, on a real database: one valid chain, ids
// 1..160000 (+ nothing else), no gaps.
func TestConcurrentAppendersKeepOneChain(t *testing.T) {
	const workers, per = 16, 10000
	dir := dbDir(t)
	l := openLog(t, dir, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	ids := make([][]uint64, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				ev := Event{Type: EventToolExecute, Caller: "tool-fs", Input: "write /workspace/a.go"}
				if i%500 == 0 {
					ev.Type = EventCapabilityIssued
				}
				r, err := l.Append(ctx, ev)
				if err != nil {
					errs <- err
					return
				}
				ids[w] = append(ids[w], r.ID)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := make([]bool, workers*per+1)
	for _, ws := range ids {
		for i, id := range ws {
			if id == 0 || id > workers*per || seen[id] {
				t.Fatalf("id %d out of range or duplicated", id)
			}
			if i > 0 && id <= ws[i-1] {
				t.Fatalf("ids of one goroutine not increasing: %d after %d", id, ws[i-1])
			}
			seen[id] = true
		}
	}
	must(t, l.Close())
	l = openLog(t, dir, nil)
	defer l.Close()
	rep, err := l.Verify(ctx, true)
	must(t, err)
	if !rep.OK() || rep.Checked != workers*per || rep.FromID != 1 || rep.ToID != workers*per || len(rep.Segments) != 1 {
		t.Fatalf("Verify(all) = %+v", rep)
	}
}
