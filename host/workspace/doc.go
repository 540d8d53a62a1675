// Package workspace owns a session's workspace: the changeset (every file a
// tool plugin proposed, with the hash of the base it was written against,
// persisted in the project database) and the views (per plugin, a
// directory under $FLUFFY_HOME/sessions/<project key>/<id>/views/ holding the project
// with the changeset applied and without every path the policy denies that
// plugin to read, and never the kernel's .fluffy directory). A view is what
// the plugin's sandbox mounts read-only as /workspace; it is refreshed
// incrementally before every call (unchanged files are hard links, never
// copied again).
//
// It also ingests a tool call's output directory into the changeset
// (Session.Ingest, the router's Ingester), all or nothing per call: paths
// re-validated with package confine (no "..", absolute, NUL, .git/ or
// .fluffy/ path; no symbolic or hard link among the artifacts), size
// limits, every path judged as fs.write again (a path the policy sends to
// review is taken but marked, so merge never auto-merges it), and a change
// written against content other than what the session's view holds now
// refused with STALE_FILE. The changeset lives in the project database
// under store.PrefixChanges and the content in the session's blob
// directory; Changes lists it for host/merge, Discard drops paths.
//
// It must never write the project: only host/merge does, after review.
// It must never write through a view entry (a hard link shares its inode
// with the project file): entries are only created, renamed over, or
// removed. It does not decide what a plugin may do beyond asking the
// policy, and it does not launch plugins.
package workspace
