// Package accesscred turns a VMI's accessCredentials into what reaches
// the guest, as KubeVirt does: the SSH public keys of a Secret written by
// the guest agent as the whole authorized_keys of each listed user
// (qemuGuestAgent) or put into the cloud-init seed's meta-data (noCloud),
// and the passwords of a Secret (one key per user) set by the guest agent.
//
// Read takes each credential's Secret as a file tree (the launcher Pod's
// mount, or the handler's view of it on the node) and checks what it
// reads: a line that is not an SSH public key, or a user name that is not
// one, is reported and leaves that user untouched rather than half
// written. Apply hands the result to the guest agent.
package accesscred
