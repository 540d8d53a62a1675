// Package router owns one tool call: state gate, policy, dispatch, sanitize, audit. It must not own plugin processes.
package router
