// Package brief owns what the model is told about the project before its
// first turn: the repository's own instructions (AGENTS.md, or CLAUDE.md
// where a directory has no AGENTS.md, at the root and in the directories
// of the files a task touches, nearest last so it wins), a short overview
// (languages and test runners, the top of the file tree without what
// .gitignore ignores, the git branch and whether the tree is dirty) and the
// date and OS, all within a stated token budget.
//
// Everything it reads is repository text: it is bounded, stripped of
// control characters and marked in the prompt as information that grants
// nothing. It reads the project only through an fs.FS and never writes.
// It must not import the kernel, the router or any plugin package.
package brief
