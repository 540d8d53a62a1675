// Package commit owns the commit of a merge: it asks the VCS plugin to
// build the commit of the merged files against the read-only repository,
// checks what the plugin left in its output directory, and applies it to
// the project's repository.
//
// The check recomputes everything the kernel can know itself: the branch
// HEAD points at and its commit, the blobs of the merged content and the
// trees of HEAD's tree with exactly the merged paths replaced. The plugin's
// output must hold exactly the objects the repository lacks among those, plus
// one commit whose only parent is HEAD (none on an unborn branch), whose
// tree is the recomputed one and whose message and author are the ones
// asked for. Anything else — another parent, an extra or altered file, an
// object that is not part of the commit, a link, an oversized file — is
// refused with a structured error and nothing is written.
//
// Apply writes the objects (loose, content-addressed), moves the branch ref
// from HEAD to the commit under git's own lock protocol (refs/heads/<b>.lock,
// compare-and-swap on the old value), appends the reflog, and updates the
// index entries of the merged paths only, so that the user's other
// uncommitted or staged changes stay as they were.
//
// It never writes .git/config, .git/hooks or any other ref, never touches the
// working tree, and never runs git or hooks. It does not merge (host/merge)
// and does not start plugins (it gets a Plugins, host/supervisor).
package commit
