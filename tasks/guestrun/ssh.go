package guestrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
)

// SSHConfig is the connection a secret in the execute-in-vm format (as
// generate-ssh-keys writes it) describes.
type SSHConfig struct {
	User   string
	Signer ssh.Signer
	// HostKey, when set, is the only host key accepted.
	HostKey ssh.PublicKey
	// Insecure accepts any host key (disable-strict-host-key-checking).
	Insecure bool
	// Ignored are additional-ssh-options, which Go's client does not take.
	Ignored string
}

// ParseSSHSecret reads a connection secret: the private key under
// ssh-privatekey (kubernetes.io/ssh-auth) or private-key, user (default
// root), host-public-key or disable-strict-host-key-checking: "true".
func ParseSSHSecret(name string, data map[string][]byte) (*SSHConfig, error) {
	key := data[corev1.SSHAuthPrivateKey]
	if len(key) == 0 {
		key = data["private-key"]
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("secret %s has no private key (ssh-privatekey or private-key)", name)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("secret %s: private key: %w", name, err)
	}
	cfg := &SSHConfig{User: string(bytes.TrimSpace(data["user"])), Signer: signer, Ignored: string(data["additional-ssh-options"])}
	if cfg.User == "" {
		cfg.User = "root"
	}
	if hk := bytes.TrimSpace(data["host-public-key"]); len(hk) > 0 {
		if cfg.HostKey, _, _, _, err = ssh.ParseAuthorizedKey(hk); err != nil {
			return nil, fmt.Errorf("secret %s: host-public-key: %w", name, err)
		}
	}
	if v := string(bytes.TrimSpace(data["disable-strict-host-key-checking"])); v != "" {
		if cfg.Insecure, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("secret %s: disable-strict-host-key-checking %q is not true or false", name, v)
		}
	}
	if cfg.HostKey == nil && !cfg.Insecure {
		return nil, fmt.Errorf("secret %s gives neither host-public-key nor disable-strict-host-key-checking: \"true\"; the guest's host key cannot be checked", name)
	}
	return cfg, nil
}

func (c *SSHConfig) clientConfig() *ssh.ClientConfig {
	cb := ssh.FixedHostKey(c.HostKey)
	if c.HostKey == nil {
		cb = ssh.InsecureIgnoreHostKey() //nolint:gosec // asked for by disable-strict-host-key-checking
	}
	return &ssh.ClientConfig{User: c.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(c.Signer)}, HostKeyCallback: cb, Timeout: 5 * time.Second}
}

// shellCommand is what the remote shell runs: a script as it is; command
// and args joined by spaces, unquoted, as kubevirt-tekton-tasks does, so a
// TaskRun written for it (command: [ls], args: ["-la /tmp"]) means the same.
func shellCommand(req guestexec.Request) string {
	if req.Command == "/bin/sh" && len(req.Args) == 2 && req.Args[0] == "-c" {
		return req.Args[1]
	}
	return strings.Join(append([]string{req.Command}, req.Args...), " ")
}

// runSSH runs the request over SSH once the VMI runs, retrying the
// connection while the guest boots.
func runSSH(ctx context.Context, c client.Client, p Params, req guestexec.Request, stdout, stderr io.Writer) error {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.VMNamespace, Name: p.SecretName}, secret); err != nil {
		return fmt.Errorf("reading the connection secret %s/%s: %w", p.VMNamespace, p.SecretName, err)
	}
	cfg, err := ParseSSHSecret(p.VMNamespace+"/"+p.SecretName, secret.Data)
	if err != nil {
		return err
	}
	if cfg.Ignored != "" {
		fmt.Fprintf(stderr, "note: additional-ssh-options %q are not applied: the step uses Go's SSH client\n", cfg.Ignored)
	}
	addr, err := waitForSSHAddress(ctx, c, p)
	if err != nil {
		return err
	}
	var last error
	for {
		code, err := sshExec(ctx, addr, cfg, shellCommand(req), stdout, stderr)
		if err == nil {
			if code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s connecting over SSH to VirtualMachineInstance %s/%s at %s: %w", p.Timeout, p.VMNamespace, p.VMName, addr, last)
		case <-time.After(time.Second):
		}
	}
}

// sshAddress is where vmi's guest takes SSH: port 22 of its first
// interface's address (its launcher Pod's, which leads to the guest), as
// kubevirt-tekton-tasks' execute-in-vm connects; empty until it has one.
func sshAddress(vmi *v1.VirtualMachineInstance) string {
	if ifs := vmi.Status.Interfaces; len(ifs) > 0 && ifs[0].IP != "" {
		return net.JoinHostPort(ifs[0].IP, "22")
	}
	return ""
}

func waitForSSHAddress(ctx context.Context, c client.Client, p Params) (string, error) {
	vmi := &v1.VirtualMachineInstance{}
	for {
		err := c.Get(ctx, client.ObjectKey{Namespace: p.VMNamespace, Name: p.VMName}, vmi)
		switch {
		case err == nil && vmi.Status.Phase == v1.Running && sshAddress(vmi) != "":
			return sshAddress(vmi), nil
		case err == nil && (vmi.Status.Phase == v1.Succeeded || vmi.Status.Phase == v1.Failed):
			return "", fmt.Errorf("VirtualMachineInstance %s/%s is %s: it will not run the command", p.VMNamespace, p.VMName, vmi.Status.Phase)
		case err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil:
			return "", fmt.Errorf("reading VirtualMachineInstance %s/%s: %w", p.VMNamespace, p.VMName, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("timed out after %s waiting for VirtualMachineInstance %s/%s to run with an address", p.Timeout, p.VMNamespace, p.VMName)
		case <-time.After(time.Second):
		}
	}
}

// sshExec runs cmd; a connection failure is an error, the command's
// failure an exit code.
func sshExec(ctx context.Context, addr string, cfg *SSHConfig, cmd string, stdout, stderr io.Writer) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg.clientConfig())
	if err != nil {
		conn.Close()
		return 0, err
	}
	cl := ssh.NewClient(cc, chans, reqs)
	defer func() { _ = cl.Close() }()
	sess, err := cl.NewSession()
	if err != nil {
		return 0, err
	}
	defer func() { _ = sess.Close() }()
	sess.Stdout, sess.Stderr = stdout, stderr
	err = sess.Run(cmd)
	var exit *ssh.ExitError
	if errors.As(err, &exit) {
		return exit.ExitStatus(), nil
	}
	return 0, err
}
