// Package proposal holds the one value that passes from the router to the
// workspace: a tool call's proposed file changes. It exists so that the
// workspace (the consumer) does not import the router for one struct.
//
// It owns only that value type. It must not gain behaviour, import other
// host packages or hold state; anything that acts on a proposal belongs
// to the router (which produces it) or the workspace (which ingests it).
package proposal
