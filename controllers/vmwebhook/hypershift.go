package vmwebhook

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

// hostedClusterFields are the HostedCluster spec fields tekvirt implements
// (see vmisubset.Fields for the syntax). The values the CRD defaults
// (networkType OVNKubernetes, controllerAvailabilityPolicy
// HighlyAvailable, issuerURL, olmCatalogPlacement, capabilities,
// autoscaling.scaling) are
// accepted since every HostedCluster carries them; README says what each
// means here.
var hostedClusterFields = []string{
	"release.image",
	"platform.type=KubeVirt",
	"platform.kubevirt.generateID",
	"platform.kubevirt.storageDriver.type=Default|Manual|None",
	"platform.kubevirt.storageDriver.manual.storageClassMapping.infraStorageClassName",
	"platform.kubevirt.storageDriver.manual.storageClassMapping.guestStorageClassName",
	"platform.kubevirt.storageDriver.manual.storageClassMapping.group",
	"platform.kubevirt.storageDriver.manual.volumeSnapshotClassMapping.infraVolumeSnapshotClassName",
	"platform.kubevirt.storageDriver.manual.volumeSnapshotClassMapping.guestVolumeSnapshotClassName",
	"platform.kubevirt.storageDriver.manual.volumeSnapshotClassMapping.group",
	"etcd.managementType=Managed",
	"etcd.managed.storage.type=PersistentVolume",
	"etcd.managed.storage.persistentVolume.storageClassName",
	"etcd.managed.storage.persistentVolume.size",
	"pullSecret.name", "sshKey.name",
	"networking.clusterNetwork.cidr", "networking.clusterNetwork.hostPrefix",
	"networking.serviceNetwork.cidr",
	"networking.networkType=OVNKubernetes|Other",
	"services.service=APIServer|OAuthServer|OIDC|Konnectivity|Ignition",
	"services.servicePublishingStrategy.type=LoadBalancer|NodePort|Route|None",
	"services.servicePublishingStrategy.nodePort.address", "services.servicePublishingStrategy.nodePort.port",
	"dns.baseDomain", "infraID",
	"controllerAvailabilityPolicy=SingleReplica|HighlyAvailable",
	"infrastructureAvailabilityPolicy=SingleReplica",
	"secretEncryption.type=aescbc",
	"secretEncryption.aescbc.activeKey.name", "secretEncryption.aescbc.backupKey.name",
	"issuerURL", "olmCatalogPlacement=management", "capabilities",
	// Typed clients always send autoscaling, which the CRD then defaults;
	// the NodePool autoscaler follows these (controllers/nodepool/autoscale).
	"autoscaling.scaling=ScaleUpAndScaleDown|ScaleUpOnly",
	"autoscaling.scaleDown.unneededDurationSeconds", "autoscaling.scaleDown.utilizationThresholdPercent",
	"fips=false",
	"nodeSelector.*", "tolerations.**",
}

// nodePoolFields are the NodePool spec fields tekvirt implements; the
// CRD's defaults (arch, management.replace, the KubeVirt platform's
// compute, rootVolume, attachDefaultNetwork, networkInterfaceMultiqueue)
// are accepted likewise.
var nodePoolFields = []string{
	"clusterName", "replicas", "autoScaling.min", "autoScaling.max",
	"release.image",
	"management.upgradeType=Replace", "management.autoRepair",
	"management.replace.strategy=RollingUpdate",
	"management.replace.rollingUpdate.maxSurge", "management.replace.rollingUpdate.maxUnavailable",
	"arch=amd64",
	"nodeLabels.*",
	"taints.key", "taints.value", "taints.effect",
	"platform.type=KubeVirt",
	"platform.kubevirt.compute.cores", "platform.kubevirt.compute.memory",
	"platform.kubevirt.compute.qosClass=Burstable|Guaranteed",
	"platform.kubevirt.rootVolume.type=Persistent",
	"platform.kubevirt.rootVolume.persistent.size", "platform.kubevirt.rootVolume.persistent.storageClass",
	"platform.kubevirt.rootVolume.persistent.accessModes=ReadWriteOnce|ReadWriteMany|ReadOnlyMany",
	"platform.kubevirt.rootVolume.persistent.volumeMode=Filesystem|Block",
	"platform.kubevirt.rootVolume.diskImage.containerDiskImage",
	"platform.kubevirt.rootVolume.cacheStrategy.type=None|PVC",
	"platform.kubevirt.attachDefaultNetwork=true",
	"platform.kubevirt.networkInterfaceMultiqueue=Enable|Disable",
	"platform.kubevirt.nodeSelector.*",
	"platform.kubevirt.hostDevices.deviceName", "platform.kubevirt.hostDevices.count",
}

var (
	hostedClusterTree = vmisubset.NewTree(hostedClusterFields...)
	nodePoolTree      = vmisubset.NewTree(nodePoolFields...)
)

// ValidateHostedClusterSpec lists the unsupported fields of a HostedCluster
// spec (as decoded from JSON) in one error naming each by its path.
func ValidateHostedClusterSpec(spec map[string]any) error {
	return vmisubset.Report(hostedClusterTree.Check("spec", spec))
}

// ValidateNodePoolSpec does the same for a NodePool spec.
func ValidateNodePoolSpec(spec map[string]any) error {
	return vmisubset.Report(nodePoolTree.Check("spec", spec))
}

// hostedCluster: supported fields only (the platform KubeVirt among them)
// and a Pod Security override the control-plane namespace can take.
func hostedCluster(_ context.Context, req admission.Request) error {
	var hc hyperv1.HostedCluster
	var spec map[string]any
	if err := decode(req, &hc, &spec); err != nil {
		return err
	}
	if _, err := hostedcluster.PodSecurityLevel(hc.Annotations); err != nil {
		return err
	}
	return ValidateHostedClusterSpec(spec)
}

// nodePool: supported fields only; replicas and autoScaling exclude each
// other, as in HyperShift.
func nodePool(_ context.Context, req admission.Request) error {
	var np hyperv1.NodePool
	var spec map[string]any
	if err := decode(req, &np, &spec); err != nil {
		return err
	}
	if err := ValidateNodePoolSpec(spec); err != nil {
		return err
	}
	if np.Spec.Replicas != nil && np.Spec.AutoScaling != nil {
		return errors.New("spec.replicas and spec.autoScaling: set one of them, not both")
	}
	if a := np.Spec.AutoScaling; a != nil && a.Min > a.Max {
		return fmt.Errorf("spec.autoScaling: min %d is above max %d", a.Min, a.Max)
	}
	return nil
}
