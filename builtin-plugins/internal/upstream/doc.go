// Package upstream holds what the network provider plugins share around
// the official SDKs they speak through: their Configure JSON (base URL,
// API key, model, retry tuning), the HTTP client that reaches the upstream
// through the kernel's CONNECT proxy when the sandbox has one, the SDK
// middleware that bounds answers and maps HTTP failures to provider errors
// (what / why / fix, retry information, x-should-retry), and the one retry
// loop (cenkalti/backoff with jitter, retry-after honoured, never after
// output was delivered).
//
// The API key is never logged and never put in an error message. It must
// not import host/.
package upstream
