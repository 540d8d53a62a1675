// Package fault breaks a running task the way the world does and checks
// what fluffy leaves behind: the kernel SIGKILLed during a sandboxed test
// run, a merge or a commit; a plugin container killed from outside; the
// provider's connection dropped mid-stream past its retries; the
// container engine cut away through a socket proxy the test closes; a
// test run killed by the sandbox's memory limit; the project's file
// system filled to the last byte by another program mid-task. After each
// fault the project holds whole files only, the session resumes, the
// audit chain verifies, no container of the test's home is left, and the
// user was told what happened and what to do.
//
// It drives the `fluffy` binary `make build` made, with a fresh
// $FLUFFY_HOME, real git, real Docker and a local fake of the OpenAI
// Chat Completions stream. It owns only its tests, the projects and homes
// they create (and the tmpfs it mounts on one, as root) and the
// containers labelled with those homes' owner id; it must never stop,
// restart or reconfigure the machine's container engine or touch
// containers it did not create.
package fault
