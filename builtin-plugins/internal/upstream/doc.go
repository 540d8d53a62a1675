// Package upstream holds what the network provider plugins share: their
// Configure JSON (base URL, API key, model), the HTTP client that reaches
// the upstream through the kernel's CONNECT proxy when the sandbox has one,
// a bounded server-sent-events reader, and the mapping of HTTP failures to
// provider errors with retry information.
//
// The API key is never logged and never put in an error message. It must
// not import host/.
package upstream
