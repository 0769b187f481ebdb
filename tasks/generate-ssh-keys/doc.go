// Package generatesshkeys is the step code of the generate-ssh-keys task: it
// makes an SSH key pair in pure Go, appends the public key to a new or
// existing Secret and stores the private key in a new Secret in the
// execute-in-vm connection format. It never overwrites a private key secret.
package generatesshkeys
