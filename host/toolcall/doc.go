// Package toolcall repairs the two things models most often get wrong in a
// tool call before the kernel judges it: a tool name spelled another way
// (fs_read, fs-read, functions.fs.read, fs.Read) and arguments wrapped in a
// JSON string or a markdown ```json fence. It only proposes: the router
// looks the candidates up, takes a name only when exactly one tool
// matches, and audits every repair.
//
// It must not look anything up itself or guess beyond these spellings: a
// call that does not repair to exactly one meaning is left as the model
// sent it, for the router to refuse with an error the model can act on.
package toolcall
