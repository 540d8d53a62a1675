package runtime

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/stats"
)

func TestOrphanWatchExitsOnlyAfterLastConnection(t *testing.T) {
	exited := make(chan int, 1)
	w := newOrphanWatch(func(c int) { exited <- c }, 50*time.Millisecond, time.Hour)
	ctx := context.Background()
	w.HandleConn(ctx, &stats.ConnBegin{})
	w.HandleConn(ctx, &stats.ConnBegin{})
	w.HandleConn(ctx, &stats.ConnEnd{})
	select {
	case <-exited:
		t.Fatal("exited while a connection was still open")
	case <-time.After(150 * time.Millisecond):
	}
	// A reconnect inside the grace period cancels the exit.
	w.HandleConn(ctx, &stats.ConnEnd{})
	w.HandleConn(ctx, &stats.ConnBegin{})
	select {
	case <-exited:
		t.Fatal("exited although the kernel reconnected")
	case <-time.After(150 * time.Millisecond):
	}
	w.HandleConn(ctx, &stats.ConnEnd{})
	select {
	case c := <-exited:
		if c != 3 {
			t.Fatalf("exit code %d", c)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("did not exit after the last connection closed")
	}
}

func TestOrphanWatchExitsWhenNobodyConnects(t *testing.T) {
	exited := make(chan int, 1)
	newOrphanWatch(func(c int) { exited <- c }, time.Second, 50*time.Millisecond)
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		t.Fatal("no exit without a first connection")
	}
}
