package provider

import "runtime"

// sendNow sends one event of a streamed turn and then yields the
// processor, so gRPC's writer goroutine puts the event on the wire now.
//
// Why: a provider plugin runs with GOMAXPROCS=1 (its sandbox has half a
// CPU). Send only queues the message for gRPC's writer goroutine; when the
// upstream's chunks are already buffered, the plugin's decode loop never
// blocks, so the writer waited for the runtime's 10 ms preemption and the
// first text delta reached the kernel ~8 ms late (p50, measured with
// BenchmarkOpenAITurn). Yielding after each send cost nothing measurable.
func sendNow[T any](send func(T) error, ev T) error {
	err := send(ev)
	runtime.Gosched()
	return err
}
