package e2e

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// virtctl runs KubeVirt's virtctl and returns its output; it fails the
// test when virtctl fails.
func virtctl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, framework.Virtctl(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("virtctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// virtctlOut runs virtctl args, which may fail, and returns what it said.
func virtctlOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, framework.Virtctl(t), args...).CombinedOutput()
	return string(out), err
}

// background starts virtctl args until the test ends.
func virtctlBackground(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(framework.Virtctl(t), args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("virtctl %s:\n%s", strings.Join(args, " "), out.String())
	})
}

// sshKeyFile writes a new ed25519 private key for ssh -i and returns its
// path and authorized_keys line.
func sshKeyFile(t *testing.T) (string, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return path, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
}

// TestVirtctl: KubeVirt's own virtctl, built from KubeVirt's source,
// drives a VM through tekvirt unchanged: version (the server's), start,
// guestosinfo, ssh (its ProxyCommand is port-forward --stdio to the guest's
// sshd), port-forward to a guest port no interface declares, console,
// vnc (an RFB handshake through --proxy-only), restart and stop. A viewer
// or an editor of another namespace, may not port-forward or open the
// display, a malformed port is a 400,
// and port-forward to a VM that does not run is KubeVirt's conflict.
func TestVirtctl(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	if out := virtctl(t, "version"); !strings.Contains(out, "Server Version: version.Info{GitVersion:\"v") {
		t.Errorf("virtctl version:\n%s", out)
	}

	key, authorized := sshKeyFile(t)
	vm := framework.GuestVM(ns, "virtctl", framework.GuestImage, v1.RunStrategyHalted)
	vm.Spec.Template.Spec.Volumes[1].CloudInitNoCloud.UserData = "#cloud-config\nhostname: virtctl-guest\nssh_authorized_keys:\n  - " + authorized + "\n"
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if _, err := portForwardStream(t, f, "", ns, "virtualmachines", vm.Name, "22"); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "VMI is not started") {
		t.Errorf("port-forward to a halted VM: %v, want 409 VMI is not started", err)
	}
	virtctl(t, "start", vm.Name, "-n", ns)
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running with its agent", framework.AgentConnected)

	info := &v1.VirtualMachineInstanceGuestAgentInfo{}
	if out := virtctl(t, "guestosinfo", vm.Name, "-n", ns); json.Unmarshal([]byte(out), info) != nil || info.Hostname != "virtctl-guest" {
		t.Errorf("virtctl guestosinfo:\n%s", out)
	}

	out := virtctl(t, "ssh", "root@vm/"+vm.Name, "-n", ns, "-i", key,
		"--local-ssh-opts=-oStrictHostKeyChecking=no", "--local-ssh-opts=-oUserKnownHostsFile=/dev/null",
		"--command", "hostname; echo via-virtctl-$((6*7))")
	if !strings.Contains(out, "virtctl-guest") || !strings.Contains(out, "via-virtctl-42") {
		t.Errorf("virtctl ssh:\n%s", out)
	}

	// A web server on a port no interface of the VMI declares: reached
	// through a forward made on demand in the launcher.
	res, err := podLauncher(t, f, f.LauncherPod(t, vmi)).Exec(ctx, guestexec.Request{Command: "/bin/sh",
		Args: []string{"-c", "mkdir -p /tmp/www && echo tekvirt-port-forward > /tmp/www/index.html && busybox httpd -p 8080 -h /tmp/www"}, TimeoutSeconds: 10})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("starting a web server in the guest: %v %+v", err, res)
	}
	local := freeLocalPort(t)
	virtctlBackground(t, "port-forward", "vmi/"+vm.Name, "-n", ns, local+":8080")
	framework.Eventually(t, time.Minute, "the guest's web server through virtctl port-forward", func() error {
		resp, err := http.Get("http://127.0.0.1:" + local + "/index.html")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "tekvirt-port-forward") {
			return fmt.Errorf("%s: %q", resp.Status, body)
		}
		return nil
	})

	checkConsoleCommand(t, os.Environ(), framework.Virtctl(t), "console", vm.Name, "-n", ns)
	checkVirtctlVNC(t, ns, vm.Name)

	bindUser(t, f, ns, "e2e-viewer", "view")
	if _, err := portForwardStream(t, f, "e2e-viewer", ns, "virtualmachineinstances", vm.Name, "22"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "virtualmachineinstances/portforward") {
		t.Errorf("port-forward by a viewer: %v, want 403 naming virtualmachineinstances/portforward", err)
	}
	if _, err := dialSubresource(t, f, "e2e-viewer", "/apis/subresources.kubevirt.io/v1/namespaces/"+ns+"/virtualmachineinstances/"+vm.Name+"/vnc"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "virtualmachineinstances/vnc") {
		t.Errorf("vnc by a viewer: %v, want 403 naming virtualmachineinstances/vnc", err)
	}
	// An editor of another namespace reaches no stream of this one.
	other := f.Namespace(t)
	bindUser(t, f, other, "e2e-editor", "edit")
	for _, path := range []string{"virtualmachineinstances/" + vm.Name + "/portforward/22", "virtualmachines/" + vm.Name + "/portforward/22",
		"virtualmachineinstances/" + vm.Name + "/vnc"} {
		if _, err := dialSubresource(t, f, "e2e-editor", "/apis/subresources.kubevirt.io/v1/namespaces/"+ns+"/"+path); !apierrors.IsForbidden(err) {
			t.Errorf("%s by an editor of another namespace: %v, want 403", path, err)
		}
	}
	if _, err := portForwardStream(t, f, "", ns, "virtualmachineinstances", vm.Name, "99999"); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "99999") {
		t.Errorf("port-forward to port 99999: %v, want 400 naming it", err)
	}

	uid := vmi.UID
	virtctl(t, "restart", vm.Name, "-n", ns)
	framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "a new VMI running", func(v *v1.VirtualMachineInstance) error {
		if v.UID == uid {
			return fmt.Errorf("still the first VMI")
		}
		return framework.AgentConnected(v)
	})
	virtctl(t, "stop", vm.Name, "-n", ns)
	framework.Eventually(t, 3*time.Minute, "the VMI gone after virtctl stop", func() error {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vm.Name}, &v1.VirtualMachineInstance{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("VMI still there (%w)", err)
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil || *vm.Spec.RunStrategy != v1.RunStrategyHalted {
		t.Errorf("runStrategy after start, restart, stop: %v %v, want Halted untouched", vm.Spec.RunStrategy, err)
	}
}

// checkConsoleCommand types a command on a console client (path with
// args: virtctl console, tekvirt console; stdin a pipe, as in a script)
// and reads its output, then leaves with Ctrl+].
func checkConsoleCommand(t *testing.T, env []string, path string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 1)
	go func() {
		var all strings.Builder
		r := bufio.NewReader(pr)
		for !strings.Contains(all.String(), "console-42") {
			b, err := r.ReadByte()
			if err != nil {
				break
			}
			all.WriteByte(b)
		}
		seen <- all.String()
		_, _ = io.Copy(io.Discard, pr)
	}()
	// virtctl says it connected before the stream is up: repeat the line
	// until it comes back.
	var out string
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for out == "" {
		if _, err := io.WriteString(in, "echo console-$((6*7))\n"); err != nil {
			t.Fatalf("writing to %s: %v", args, err)
		}
		select {
		case out = <-seen:
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: no answer", args)
		}
	}
	if !strings.Contains(out, "console-42") {
		t.Errorf("%s output lacks console-42:\n%s", args, out)
	}
	_, _ = in.Write([]byte{29})
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("%s after Ctrl+]: %v", args, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not end on Ctrl+]", args)
	}
	_ = pw.Close()
}

// checkVirtctlVNC opens the guest's display with virtctl vnc --proxy-only
// and speaks RFB to it: the server's version, no authentication (the API
// server authorized the caller), and a framebuffer of the VGA's size.
func checkVirtctlVNC(t *testing.T, ns, vmi string) {
	t.Helper()
	port := freeLocalPort(t)
	virtctlBackground(t, "vnc", "--proxy-only", "--port", port, vmi, "-n", ns)
	var conn net.Conn
	framework.Eventually(t, 30*time.Second, "virtctl vnc's proxy listening", func() (err error) {
		conn, err = net.Dial("tcp", "127.0.0.1:"+port)
		return err
	})
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	width, height, name, err := rfbHandshake(conn)
	if err != nil {
		t.Fatalf("RFB through virtctl vnc: %v", err)
	}
	if width == 0 || height == 0 {
		t.Errorf("framebuffer %dx%d, want a display", width, height)
	}
	t.Logf("VNC desktop %q %dx%d", name, width, height)
}

// rfbHandshake speaks RFB 3.8 up to the server's init message (RFC 6143
// 7.1-7.3) and returns the framebuffer's size and the desktop's name.
func rfbHandshake(c net.Conn) (uint16, uint16, string, error) {
	version := make([]byte, 12)
	if _, err := io.ReadFull(c, version); err != nil {
		return 0, 0, "", fmt.Errorf("server version: %w", err)
	}
	if !strings.HasPrefix(string(version), "RFB 003.") {
		return 0, 0, "", fmt.Errorf("server version %q", version)
	}
	if _, err := c.Write([]byte("RFB 003.008\n")); err != nil {
		return 0, 0, "", err
	}
	var n uint8
	if err := binary.Read(c, binary.BigEndian, &n); err != nil || n == 0 {
		return 0, 0, "", fmt.Errorf("security types: %d %w", n, err)
	}
	types := make([]byte, n)
	if _, err := io.ReadFull(c, types); err != nil {
		return 0, 0, "", err
	}
	if !strings.ContainsRune(string(types), 1) {
		return 0, 0, "", fmt.Errorf("security types %v lack None", types)
	}
	if _, err := c.Write([]byte{1}); err != nil {
		return 0, 0, "", err
	}
	var result uint32
	if err := binary.Read(c, binary.BigEndian, &result); err != nil || result != 0 {
		return 0, 0, "", fmt.Errorf("security result %d %w", result, err)
	}
	if _, err := c.Write([]byte{1}); err != nil { // shared
		return 0, 0, "", err
	}
	var init struct {
		Width, Height uint16
		PixelFormat   [16]byte
		NameLength    uint32
	}
	if err := binary.Read(c, binary.BigEndian, &init); err != nil {
		return 0, 0, "", fmt.Errorf("server init: %w", err)
	}
	name := make([]byte, min(init.NameLength, 4096))
	if _, err := io.ReadFull(c, name); err != nil {
		return 0, 0, "", err
	}
	return init.Width, init.Height, string(name), nil
}

// portForwardStream opens a port-forward to port of the VMI (resource
// virtualmachineinstances) or of the VM's VMI (virtualmachines) as user.
func portForwardStream(t *testing.T, f *framework.Framework, user, ns, resource, name, port string) (*wsStream, error) {
	t.Helper()
	return dialSubresource(t, f, user, "/apis/subresources.kubevirt.io/v1/namespaces/"+ns+"/"+resource+"/"+name+"/portforward/"+port)
}

func freeLocalPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// TestVirtctlImageUpload: KubeVirt's virtctl image-upload creates the
// DataVolume, waits for the upload server as CDI's annotations on the claim
// say, sends the guest's qcow2.xz through the upload proxy and returns once
// they say processing completed; the claim then holds the disk.
func TestVirtctlImageUpload(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	proxy := uploadProxy(t, f, c)
	out := virtctl(t, "image-upload", "dv", "by-virtctl", "-n", ns, "--size=128Mi",
		"--image-path="+filepath.Join(f.GuestDir(), "guest.qcow2.xz"), "--uploadproxy-url="+proxy.url, "--insecure")
	for _, want := range []string{"Processing completed successfully", "completed successfully"} {
		if !strings.Contains(out, want) {
			t.Errorf("virtctl image-upload output lacks %q:\n%s", want, out)
		}
	}
	dv := &cdiv1.DataVolume{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "by-virtctl"}, dv); err != nil || dv.Status.Phase != cdiv1.Succeeded {
		t.Errorf("DataVolume after virtctl image-upload: %q %v, want Succeeded", dv.Status.Phase, err)
	}
	if got := volumeFiles(t, c, ns, "by-virtctl"); len(got) != 1 || got[0] != "disk.img" {
		t.Errorf("the volume holds %v, want disk.img", got)
	}
}
