// Package providerkit is the skeleton an AI-provider plugin is built on:
// its identity (Info), its configuration parsed once at Configure and read
// by every call, Health, and one streamed turn (the tool names, the model,
// the request encoded once, attempts retried while nothing was delivered).
// A plugin supplies only what talks to its upstream: how to parse its
// configuration, encode a request and run one attempt.
//
// Plugin authors link it: it must not import host/, sandbox, badger or the
// Docker client (TestAuthorDependencies in pluginsdk/plugintest checks).
package providerkit
