// Package executeinvm is the step of the execute-in-vm task: it waits for
// the VM's guest agent, runs a command or script in the guest through the
// node handler's exec endpoint (authorized as the task's service account),
// prints the output and exits with the command's exit code.
package executeinvm
