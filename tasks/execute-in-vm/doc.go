// Package executeinvm is the step of the execute-in-vm task: it runs a
// command or script in a VM's guest (tasks/guestrun), prints the output and
// exits with the command's exit code.
package executeinvm
