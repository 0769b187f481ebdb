// Package step assembles the tekvirt-step multi-call command: one
// subcommand per task, named as the task, so one image serves every task.
package step
