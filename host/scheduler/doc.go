// Package scheduler owns task priority, dependencies and concurrency limits. It must not know what a task does.
package scheduler
