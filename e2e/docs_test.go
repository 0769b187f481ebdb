package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// runExample runs a shell example of the docs as its reader would: the
// block as a bash script (-euo pipefail) in dir, with the testbed's
// kubeconfig, its tools (kubectl, tkn, tekvirt) and KubeVirt's virtctl on
// PATH, and env added. Whatever the block left in the background is
// killed when it ends.
func runExample(t *testing.T, f *framework.Framework, e docexample.Example, dir string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", e.Body)
	cmd.Dir = dir
	path := filepath.Dir(f.Bin("kubectl")) + ":" + filepath.Dir(framework.Virtctl(t)) + ":" + os.Getenv("PATH")
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+f.Kubeconfig, "PATH="+path), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	t.Logf("example %s (%s): %s", e.ID, e, time.Since(start).Round(100*time.Millisecond))
	return string(out), err
}

// mustRunExample is runExample failing the test when the block fails or
// its output lacks one of want.
func mustRunExample(t *testing.T, f *framework.Framework, e docexample.Example, dir string, env []string, want ...string) string {
	t.Helper()
	out, err := runExample(t, f, e, dir, env...)
	if err != nil {
		t.Fatalf("example %s (%s): %v\n%s", e.ID, e, err, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("example %s (%s): output lacks %q:\n%s", e.ID, e, w, out)
		}
	}
	return out
}

// exampleTaskRef decodes a YAML example holding a `taskRef:`.
func exampleTaskRef(t *testing.T, e docexample.Example) *pipelinev1.TaskRef {
	t.Helper()
	var doc struct {
		TaskRef *pipelinev1.TaskRef `json:"taskRef"`
	}
	if err := yaml.UnmarshalStrict([]byte(e.Body), &doc); err != nil || doc.TaskRef == nil {
		t.Fatalf("example %s (%s) is not a taskRef: %v\n%s", e.ID, e, err, e.Body)
	}
	return doc.TaskRef
}

// deleteDefault deletes what an earlier, failed run of the examples may
// have left in the default namespace under their names.
func deleteDefault(t *testing.T, f *framework.Framework, objects ...string) {
	t.Helper()
	args := append([]string{"--kubeconfig", f.Kubeconfig, "-n", "default", "delete", "--ignore-not-found", "--wait"}, objects...)
	if out, err := exec.Command(f.Bin("kubectl"), args...).CombinedOutput(); err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
}

// TestDocsExamples runs, as written and in the default namespace as a
// reader would, the examples of the README and docs/ that no other
// scenario runs: the first VM, a VM from `virtctl create vm` operated on
// with tekvirt and virtctl, its metrics scraped and its troubleshooting
// commands, a VM sized by an instancetype, the common templates, a
// DataVolume import cloned into a booting VM, an upload, and a VM
// snapshot restored into a new VM that boots.
func TestDocsExamples(t *testing.T) {
	t.Parallel() // mostly waiting on guests: see "Parallel" in doc.go
	f := framework.New(t)
	dir := t.TempDir()
	deleteDefault(t, f, "vm/demo", "vm/vvm", "vm/sized", "vm/from-clone", "service/vvm-ssh", "dv/imported", "dv/my-disk",
		"serviceaccount/scraper", "vmrestore/snapped-copy", "vmsnapshot/snapped-1", "vm/snapped", "vm/snapped-copy")
	// A migration of an earlier vvm that failed would hold up the
	// example's wait for the VMI's migrations to succeed.
	deleteDefault(t, f, "vmim", "-l", "kubevirt.io/vmi-name=vvm")
	deleteCluster := func() {
		_, _ = exec.Command(f.Bin("kubectl"), "--kubeconfig", f.Kubeconfig, "delete", "--ignore-not-found", "clusterrolebinding", "scraper-metrics").CombinedOutput()
	}
	deleteCluster()
	t.Cleanup(deleteCluster)
	run := func(e docexample.Example, want ...string) string {
		t.Helper()
		return mustRunExample(t, f, e, dir, nil, want...)
	}

	t.Run("readme", func(t *testing.T) {
		run(docexample.Find(t, "readme-first-vm"),
			"virtualmachine.kubevirt.io/demo created", "condition met", "Running", "was scheduled to stop", `"demo" deleted`)
	})
	t.Run("vms", func(t *testing.T) {
		run(docexample.Find(t, "vms-virtctl-create"), "virtualmachine.kubevirt.io/vvm created", "condition met", "masquerade", `"prettyName"`)
		run(docexample.Find(t, "metrics-scrape"), `kubevirt_vmi_phase_count{`)
		run(docexample.Find(t, "troubleshooting-look"), "vvm", "Conditions:", "Available=True")
		run(docexample.Find(t, "vms-migrate"), "VM vvm was scheduled to migrate", "condition met", " -> ")
		run(docexample.Find(t, "vms-operate"), "Service default/vvm-ssh created", "was scheduled to restart", "was scheduled to stop", `"vvm" deleted`)
	})
	t.Run("templates", func(t *testing.T) {
		run(docexample.Find(t, "templates-sized-vm"), "condition met", "u1.nano", "controllerRevisionRef", `"sized" deleted`)
		if out := run(docexample.Find(t, "templates-common")); strings.Count(strings.TrimSpace(out), "\n") < 1 {
			t.Errorf("no common template listed:\n%s", out)
		}
	})
	t.Run("disks", func(t *testing.T) {
		run(docexample.Find(t, "disks-import-clone-boot"), "Succeeded", "condition met", `"from-clone" deleted`)
		run(docexample.Find(t, "disks-upload"), "UploadReady", `"my-disk" deleted`)
		run(docexample.Find(t, "disks-vm-snapshot"), "Succeeded", "Online", "was scheduled to start", `"snapped-copy" deleted`)
	})
	// The examples' deletes leave nothing of theirs running: every VMI is
	// gone or going (a guest that ignores the ACPI button takes its grace
	// period, 180 s, to go).
	framework.Eventually(t, time.Minute, "the examples' VMIs gone or going", func() error {
		var list v1.VirtualMachineInstanceList
		if err := f.VMClient(t).List(context.Background(), &list, client.InNamespace("default")); err != nil {
			return err
		}
		for _, vmi := range list.Items {
			if slices.Contains([]string{"demo", "vvm", "sized", "from-clone"}, vmi.Name) && vmi.DeletionTimestamp == nil {
				return fmt.Errorf("VMI %s of an example still runs", vmi.Name)
			}
		}
		return nil
	})
}
