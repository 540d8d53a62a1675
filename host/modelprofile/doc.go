// Package modelprofile owns what fluffy knows of a model before it sends a
// request: its context window and output limit, its prices per million
// input, output and cached tokens, and whether it streams tool calls; and
// the cost of a turn's usage under those prices.
//
// The table of known models is data in this package; a user's settings
// override any field. An unknown model gets conservative defaults and a
// notice saying which settings make its cost known.
//
// It must not import the kernel or any plugin runtime: the agent and the
// kernel's wiring consume it.
package modelprofile
