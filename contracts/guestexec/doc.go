// Package guestexec is the guest command the execute-in-vm step sends the
// node's handler, which hands it to the VM's launcher (and so to the guest
// agent's guest-exec), and how the command ended.
package guestexec
