// Package cleanupvm is the step of the cleanup-vm task, meant for a
// pipeline's finally: it stops a VM (runStrategy Halted, waiting until its
// VMI is gone) and optionally deletes it, waiting until it is gone.
package cleanupvm
