package framework

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// LauncherLogLine decodes into v the first line of vmi's launcher log (JSON,
// one object a line) whose msg is msg; it fails the test when none is.
func (f *Framework) LauncherLogLine(t testing.TB, vmi *v1.VirtualMachineInstance, msg string, v any) {
	t.Helper()
	pod := f.LauncherPod(t, vmi)
	logs, err := f.Kube.CoreV1().Pods(vmi.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: launcherpod.ComputeContainer}).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			if err := json.Unmarshal(sc.Bytes(), v); err != nil {
				t.Fatalf("launcher log line %q of %s/%s: %v", msg, vmi.Namespace, vmi.Name, err)
			}
			return
		}
	}
	t.Fatalf("the launcher of %s/%s logged no %q:\n%s", vmi.Namespace, vmi.Name, msg, logs)
}

// QEMUCapabilitiesVolume is the qemu-capabilities volume of node's handler
// Pod, as this machine sees it, where its init container wrote the QEMU
// capabilities the handler gives every launcher Pod there; and the names
// of those files (at least one, or the test fails).
func (f *Framework) QEMUCapabilitiesVolume(t testing.TB, node string) (string, []string) {
	t.Helper()
	h := f.HandlerPod(t, node)
	dir, err := launcherpod.EmptyDirOnNode(HostPath(node, f.KubeletRoot()), h.UID, "qemu-capabilities")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("the handler Pod's QEMU capabilities on %s: %v", node, err)
	}
	var names []string
	for _, e := range entries {
		if launcher.IsQEMUCapabilitiesFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("the handler Pod's init container probed no QEMU on %s (%s is empty)", node, dir)
	}
	return dir, names
}
