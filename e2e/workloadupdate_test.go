package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// setLauncherImage changes the launcher image the release installs (the
// operator's --launcher-image, as applying a new release does) and waits
// for the controller to run with it.
func setLauncherImage(t *testing.T, f *framework.Framework, image string) {
	t.Helper()
	ctx := context.Background()
	deployments := f.Kube.AppsV1().Deployments(ctrlconfig.Namespace)
	op, err := deployments.Get(ctx, "tekvirt-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const flag = "--launcher-image="
	args := op.Spec.Template.Spec.Containers[0].Args
	for i, a := range args {
		if strings.HasPrefix(a, flag) {
			args[i] = flag + image
		}
	}
	if _, err := deployments.Update(ctx, op, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "the controller running with launcher "+image, func() error {
		d, err := deployments.Get(ctx, "tekvirt-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, flag+image) {
			return errors.New("not updated by the operator yet")
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != d.Status.Replicas || d.Status.AvailableReplicas != d.Status.Replicas || d.Status.Replicas != 1 {
			return fmt.Errorf("rolling out: %+v", d.Status)
		}
		return nil
	})
}

// TestWorkloadUpdate: after a release with a new launcher (the operator's
// --launcher-image changed), a running VM's launcher Pod is outdated: with
// HCO's default workloadUpdateStrategy (LiveMigrate) it is live-migrated,
// by a migration kubevirt-workload-update-*, to a launcher Pod of the new
// image, and the guest runs on (same VMI, same boot), no longer labelled
// kubevirt.io/outdatedLauncherImage (the label while outdated is the
// reconciler test's: here it lasts a moment).
func TestWorkloadUpdate(t *testing.T) {
	migrationHeavy(t, "changes the cluster's launcher image (about 2 min)")
	// Not parallel: every running VM of the cluster is moved.
	f := framework.New(t)
	f.TwoNodes(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	vm, vmi, boot := migratableVM(t, f, c, ns, "updated")
	oldImage := f.LauncherPod(t, vmi).Spec.Containers[0].Image
	newImage := strings.Replace(oldImage, "@sha256:", ":workload-update@sha256:", 1)
	if newImage == oldImage {
		t.Fatalf("the launcher image %s is not pinned by digest", oldImage)
	}
	setLauncherImage(t, f, newImage)
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), vm)
		framework.WaitGone(t, c, vmi, 2*time.Minute)
		setLauncherImage(t, f, oldImage)
	})
	framework.Eventually(t, 5*time.Minute, "the VM moved to a launcher of the new image", func() error {
		got := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil {
			return err
		}
		if _, ok := got.Labels[v1.OutdatedLauncherImageLabel]; ok {
			return errors.New("labelled outdated")
		}
		if got.Status.Phase != v1.Running || migratingNow(got) {
			return fmt.Errorf("%s, migration %+v", got.Status.Phase, got.Status.MigrationState)
		}
		if img := f.LauncherPod(t, got).Spec.Containers[0].Image; img != newImage {
			return fmt.Errorf("launcher image %s", img)
		}
		return nil
	})
	var migrations v1.VirtualMachineInstanceMigrationList
	if err := c.List(ctx, &migrations, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(migrations.Items) != 1 || !strings.HasPrefix(migrations.Items[0].Name, "kubevirt-workload-update-") || migrations.Items[0].Status.Phase != v1.MigrationSucceeded {
		t.Errorf("the workload update's migrations: %+v", migrations.Items)
	}
	moved := framework.WaitVMI(t, c, ns, vm.Name, time.Minute, "running", framework.AgentConnected)
	if moved.UID != vmi.UID || guestBootID(t, f, moved) != boot {
		t.Error("the guest booted again, or its VMI changed, in the workload update")
	}
}

// migratingNow: the VMI's migration state says one has not ended.
func migratingNow(vmi *v1.VirtualMachineInstance) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && !ms.Completed && !ms.Failed
}
