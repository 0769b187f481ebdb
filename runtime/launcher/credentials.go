package launcher

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"time"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/runtime/accesscred"
)

// CredentialsStatus is how the VMI's accessCredentials last reached the
// guest (KubeVirt's AccessCredentialsSynchronized condition).
type CredentialsStatus struct {
	Synchronized bool   `json:"synchronized"`
	Message      string `json:"message,omitempty"`
}

// credentialsResync is how often credentials are written again even if
// their Secrets did not change (a user may have edited authorized_keys in
// the guest), as KubeVirt's.
const credentialsResync = 5 * time.Minute

// credentials keeps the guest's access credentials in step with their
// Secrets, which the kubelet updates in the Pod's mounts.
type credentials struct {
	creds []v1.AccessCredential
	// path is where the Secret of creds[i] is mounted.
	path func(i int) string
	// applied is the digest last written without a failure, at when.
	applied string
	when    time.Time
	status  *CredentialsStatus
}

func newCredentials(vmi *v1.VirtualMachineInstance) *credentials {
	return &credentials{creds: vmi.Spec.AccessCredentials, path: launcherpod.AccessCredentialPath}
}

// sync reads the Secrets and, when they changed, the agent came back
// after it was away (a rebooted guest), the last write failed or the
// resync is due, writes them through the agent. It returns the status to
// report (nil: the VMI has no credentials).
func (c *credentials) sync(ctx context.Context, a accesscred.Agent, connected bool) *CredentialsStatus {
	if len(c.creds) == 0 {
		return nil
	}
	set := accesscred.Read(c.creds, func(i int) (fs.FS, error) {
		return os.DirFS(c.path(i)), nil
	})
	if !accesscred.NeedsAgent(c.creds) {
		c.status = report(set.Problems)
		return c.status
	}
	if !connected {
		c.applied = ""
		return &CredentialsStatus{Message: "Guest agent is offline"}
	}
	if set.Digest == c.applied && time.Since(c.when) < credentialsResync {
		return c.status
	}
	failed := accesscred.Apply(ctx, a, set)
	c.status = report(failed)
	c.applied, c.when = "", time.Now()
	// What the Secrets hold is not fixed by writing it again; what the
	// agent refused may be (a user created later, an agent restarting).
	if len(failed) == len(set.Problems) {
		c.applied = set.Digest
	}
	return c.status
}

func report(failed []string) *CredentialsStatus {
	if len(failed) > 0 {
		return &CredentialsStatus{Message: strings.Join(failed, "; ")}
	}
	return &CredentialsStatus{Synchronized: true}
}
