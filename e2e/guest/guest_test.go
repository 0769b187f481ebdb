package guest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/tekvirt/tekvirt/runtime/agent"
	"github.com/tekvirt/tekvirt/runtime/cloudinit"
)

func TestCPIOLayout(t *testing.T) {
	var buf bytes.Buffer
	err := writeCPIO(&buf, map[string]cpioEntry{
		"bin":    {mode: modeDir | 0o755},
		"bin/sh": {mode: modeSymlink | 0o777, data: []byte("busybox")},
		"init":   {mode: modeFile | 0o755, data: []byte("#!/bin/sh\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if buf.Len()%4 != 0 {
		t.Fatalf("archive length %d is not 4-aligned", buf.Len())
	}
	for _, want := range []string{"070701", "bin\x00", "bin/sh\x00", "busybox", "init\x00", "TRAILER!!!\x00"} {
		if !strings.Contains(out, want) {
			t.Fatalf("archive lacks %q", want)
		}
	}
	if strings.Index(out, "bin\x00") > strings.Index(out, "bin/sh\x00") {
		t.Fatal("directory after its content")
	}
	// Cross-check with the system's cpio when present.
	if _, err := exec.LookPath("cpio"); err == nil {
		cmd := exec.Command("cpio", "-t")
		cmd.Stdin = bytes.NewReader(buf.Bytes())
		list, err := cmd.Output()
		if err != nil || strings.Fields(string(list))[2] != "init" {
			t.Fatalf("cpio -t: %q %v", list, err)
		}
	}
}

// TestGuestBootsAndAgentAnswers builds the guest from Debian packages,
// boots its qcow2 disk in QEMU (BIOS and syslinux, as a containerDisk boots;
// TEKVIRT_GUEST_BOOT=kernel boots kernel and initrd directly) and runs
// commands in it through the guest agent; a NoCloud seed disk sets its
// hostname and root's SSH key.
func TestGuestBootsAndAgentAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cache := filepath.Join(os.TempDir(), "tekvirt-guest-cache")
	if h := os.Getenv("TEKVIRT_HOME"); h != "" {
		cache = filepath.Join(h, "cache")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	g, err := Build(ctx, cache)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest built in %s: %s %s", time.Since(start).Round(time.Millisecond), g.Kernel, g.Initrd)

	dir := t.TempDir()
	sock, serial := filepath.Join(dir, "agent.sock"), filepath.Join(dir, "serial.log")
	sshPort := freePort(t)
	seed := filepath.Join(dir, "seed.img")
	signer, key := newKey(t)
	nc := &cloudinit.NoCloud{
		UserData: "#cloud-config\nhostname: seeded-guest\nssh_authorized_keys:\n  - " + key + "\n",
		MetaData: "instance-id: e2e\nlocal-hostname: from-meta-data\n",
	}
	if err := nc.WriteImage(ctx, seed); err != nil {
		t.Fatal(err)
	}
	// TCG unless asked: on these machines /dev/kvm can exist and still hang
	// a guest before its first console line.
	accel := "tcg"
	if os.Getenv("TEKVIRT_KVM") == "1" {
		accel = "kvm"
	}
	boot := []string{"-kernel", g.Kernel, "-initrd", g.Initrd, "-append", "console=ttyS0 panic=-1 quiet"}
	if os.Getenv("TEKVIRT_GUEST_BOOT") != "kernel" {
		// From the qcow2 disk, as a containerDisk boots: BIOS -> syslinux -> kernel.
		disks, err := g.Disks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		boot = []string{"-drive", "file=" + disks.QCOW2 + ",format=qcow2,if=virtio,snapshot=on"}
	}
	qemu := exec.CommandContext(ctx, "qemu-system-x86_64", append(append([]string{"-machine", "pc,accel=" + accel, "-m", "256", "-smp", "1"}, boot...),
		"-display", "none", "-monitor", "none", "-no-reboot", "-serial", "file:"+serial,
		"-netdev", "user,id=n0,hostfwd=tcp:127.0.0.1:"+sshPort+"-:22", "-device", "virtio-net-pci,netdev=n0,addr=0x1f",
		"-chardev", "socket,id=qga0,path="+sock+",server=on,wait=off",
		"-drive", "file="+seed+",format=raw,if=virtio,readonly=on",
		"-device", "virtio-serial", "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0")...)
	var qout bytes.Buffer
	qemu.Stdout, qemu.Stderr = &qout, &qout
	start = time.Now()
	if err := qemu.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = qemu.Process.Kill(); _ = qemu.Wait() }()

	var c *agent.Client
	for c == nil {
		if ctx.Err() != nil {
			log, _ := os.ReadFile(serial)
			t.Fatalf("no guest agent (%s)\nqemu: %s\nserial:\n%s", accel, qout.String(), log)
		}
		cl, err := agent.Dial(ctx, sock)
		if err == nil {
			sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
			if cl.Sync(sctx) == nil {
				c = cl
			} else {
				cl.Close()
			}
			scancel()
		}
		if c == nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
	defer c.Close()
	t.Logf("%s guest agent answered %s after QEMU start", accel, time.Since(start).Round(time.Millisecond))
	res, err := c.Exec(ctx, "/bin/uname", []string{"-r"}, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != g.KernelVersion {
		t.Fatalf("uname -r in guest = %d %q %q, want %s", res.ExitCode, res.Stdout, res.Stderr, g.KernelVersion)
	}
	res, err = c.Exec(ctx, "/bin/sh", []string{"-c", "echo oops >&2; exit 3"}, 50*time.Millisecond)
	if err != nil || res.ExitCode != 3 || strings.TrimSpace(string(res.Stderr)) != "oops" {
		t.Fatalf("exit code and stderr not propagated: %+v %v", res, err)
	}
	res, err = c.Exec(ctx, "/bin/sh", []string{"-c", "hostname; cat /root/.ssh/authorized_keys"}, 50*time.Millisecond)
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "seeded-guest\n"+key+"\n" {
		t.Fatalf("NoCloud seed not applied: %q %v", res.Stdout, err)
	}
	// DHCP from user networking, and dropbear accepting the seeded key.
	var sshOut string
	for sshOut == "" {
		out, err := sshRun(ctx, "127.0.0.1:"+sshPort, signer, "hostname; ip -4 addr show eth0")
		if err == nil && strings.Contains(out, "10.0.2.15") {
			sshOut = out
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no SSH with an address into the guest: %v %q", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.HasPrefix(sshOut, "seeded-guest\n") {
		t.Fatalf("SSH into the guest: %q", sshOut)
	}
	log, _ := os.ReadFile(serial)
	if !strings.Contains(string(log), "tekvirt-guest: ready") {
		t.Fatalf("serial log lacks the ready line:\n%s", log)
	}
}

// newKey makes an ed25519 key and its authorized_keys line.
func newKey(t *testing.T) (ssh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " e2e"
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// sshRun runs a command over SSH as root.
func sshRun(ctx context.Context, addr string, signer ssh.Signer, cmd string) (string, error) {
	cfg := &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), //nolint:gosec // a throwaway test guest
		Timeout:         3 * time.Second}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		return "", err
	}
	client := ssh.NewClient(c, chans, reqs)
	defer func() { _ = client.Close() }()
	sess, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer func() { _ = sess.Close() }()
	out, err := sess.CombinedOutput(cmd)
	return string(out), err
}

// The guest's network-config reader, run by this machine's busybox (the
// guest's own) on network data as KubeVirt's examples and cloud-init's
// documentation write it.
func TestNetworkConfigAwk(t *testing.T) {
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("no /bin/busybox (apt-get install busybox-static), which the guest is built from")
	}
	for name, tc := range map[string]struct{ config, want string }{
		"KubeVirt's IPv6 masquerade example": {
			config: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n    addresses: [ fd10:0:2::2/120 ]\n    gateway6: fd10:0:2::1\n",
			want:   "address eth0 fd10:0:2::2/120\ngateway6 eth0 fd10:0:2::1\n",
		},
		"block lists, quotes, comments; DNS servers, routes and match skipped": {
			config: "network:\n  version: 2\n  ethernets:\n    eth1:   # the lab\n      match:\n        macaddress: \"52:54:00:aa:bb:cc\"\n" +
				"      addresses:\n        - 192.168.78.5/24\n        - \"fd20::5/64\"\n      gateway4: 192.168.78.1\n" +
				"      nameservers:\n        addresses: [10.96.0.10]\n      routes:\n        - to: 10.0.0.0/8\n          via: 192.168.78.1\n" +
				"    eth2:\n      addresses: ['10.1.1.1/24', 10.1.1.2/24]\n",
			want: "address eth1 192.168.78.5/24\naddress eth1 fd20::5/64\ngateway4 eth1 192.168.78.1\naddress eth2 10.1.1.1/24\naddress eth2 10.1.1.2/24\n",
		},
		"DHCP only": {config: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n", want: ""},
	} {
		cmd := exec.Command("/bin/busybox", "awk", "-f", "network-config.awk")
		cmd.Stdin = strings.NewReader(tc.config)
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != tc.want {
			t.Errorf("%s: %v\n%s\nwant\n%s", name, err, out, tc.want)
		}
	}
}
