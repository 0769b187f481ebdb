// Package guestrun runs a command or script in a VM's guest for the tasks
// that do (execute-in-vm, cleanup-vm): through the QEMU guest agent, via
// the node handler's exec endpoint (authorized as the task's service
// account), or over SSH with a generate-ssh-keys connection secret. It
// starts a VM that is not running first, waits for the agent (or SSH),
// copies the output and carries the exit code out.
package guestrun
