package step

import (
	"github.com/spf13/cobra"

	cleanupvm "github.com/tekvirt/tekvirt/tasks/cleanup-vm"
	clonedisk "github.com/tekvirt/tekvirt/tasks/clone-disk"
	copytemplate "github.com/tekvirt/tekvirt/tasks/copy-template"
	createvm "github.com/tekvirt/tekvirt/tasks/create-vm-from-manifest"
	vmfromtemplate "github.com/tekvirt/tekvirt/tasks/create-vm-from-template"
	diskuploader "github.com/tekvirt/tekvirt/tasks/disk-uploader"
	executeinvm "github.com/tekvirt/tekvirt/tasks/execute-in-vm"
	generatesshkeys "github.com/tekvirt/tekvirt/tasks/generate-ssh-keys"
	hostedclusteraccess "github.com/tekvirt/tekvirt/tasks/hosted-cluster-access"
	hostedclusterbootstrap "github.com/tekvirt/tekvirt/tasks/hosted-cluster-bootstrap"
	hostedclustercontrolplane "github.com/tekvirt/tekvirt/tasks/hosted-cluster-control-plane"
	hostedclusteretcd "github.com/tekvirt/tekvirt/tasks/hosted-cluster-etcd"
	hostedclusterpki "github.com/tekvirt/tekvirt/tasks/hosted-cluster-pki"
	hostedclusterwait "github.com/tekvirt/tekvirt/tasks/hosted-cluster-wait"
	importdisk "github.com/tekvirt/tekvirt/tasks/import-disk"
	modifydataobject "github.com/tekvirt/tekvirt/tasks/modify-data-object"
	modifytemplate "github.com/tekvirt/tekvirt/tasks/modify-vm-template"
	prunedatavolumes "github.com/tekvirt/tekvirt/tasks/prune-data-volumes"
	waitforvmi "github.com/tekvirt/tekvirt/tasks/wait-for-vmi-status"
)

// Root returns the tekvirt-step command with every task's step.
func Root() *cobra.Command {
	root := &cobra.Command{
		Use:           "tekvirt-step",
		Short:         "Step code of tekvirt's Tekton tasks",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(generatesshkeys.Command(), createvm.Command(), vmfromtemplate.Command(), copytemplate.Command(), modifytemplate.Command(), waitforvmi.Command(), executeinvm.Command(), cleanupvm.Command(), importdisk.Command(), clonedisk.Command(), diskuploader.Command(), modifydataobject.Command(),
		prunedatavolumes.Command(), hostedclusterpki.Command(), hostedclusteretcd.Command(), hostedclustercontrolplane.Command(), hostedclusteraccess.Command(), hostedclusterwait.Command(), hostedclusterbootstrap.Command(), copySelf())
	return root
}
