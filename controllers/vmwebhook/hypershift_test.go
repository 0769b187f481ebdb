package vmwebhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// hostedCluster is what `tekvirt create cluster kubevirt --render` writes,
// with the defaults the CRD adds before admission.
const hostedClusterManifest = `
apiVersion: hypershift.openshift.io/v1beta1
kind: HostedCluster
metadata: {name: demo, namespace: clusters}
spec:
  release: {image: 127.0.0.1:5000/tekvirt/hosted-release:latest}
  pullSecret: {name: demo-pull-secret}
  sshKey: {name: demo-ssh-key}
  infraID: demo-x7k2p
  dns: {baseDomain: example.test}
  networking:
    clusterNetwork: [{cidr: 10.132.0.0/14}]
    serviceNetwork: [{cidr: 172.31.0.0/16}]
    networkType: OVNKubernetes
  platform:
    type: KubeVirt
    kubevirt:
      storageDriver:
        type: Manual
        manual:
          storageClassMapping: [{infraStorageClassName: tekvirt-hostpath, guestStorageClassName: standard, group: fast}]
  etcd:
    managementType: Managed
    managed: {storage: {type: PersistentVolume, persistentVolume: {size: 8Gi, storageClassName: tekvirt-hostpath}}}
  services:
    - service: APIServer
      servicePublishingStrategy: {type: NodePort, nodePort: {address: 10.0.0.1}}
    - {service: OAuthServer, servicePublishingStrategy: {type: Route}}
    - {service: Konnectivity, servicePublishingStrategy: {type: Route}}
    - {service: Ignition, servicePublishingStrategy: {type: Route}}
  secretEncryption: {type: aescbc, aescbc: {activeKey: {name: demo-etcd-encryption-key}}}
  controllerAvailabilityPolicy: HighlyAvailable
  infrastructureAvailabilityPolicy: SingleReplica
  issuerURL: https://kubernetes.default.svc
  olmCatalogPlacement: management
  capabilities: {}
  fips: false
`

const nodePoolManifest = `
apiVersion: hypershift.openshift.io/v1beta1
kind: NodePool
metadata: {name: demo, namespace: clusters}
spec:
  clusterName: demo
  replicas: 2
  release: {image: 127.0.0.1:5000/tekvirt/hosted-release:latest}
  management: {upgradeType: Replace, autoRepair: false, replace: {strategy: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}}
  arch: amd64
  platform:
    type: KubeVirt
    kubevirt:
      compute: {cores: 1, memory: 1Gi, qosClass: Burstable}
      rootVolume: {type: Persistent, persistent: {size: 4Gi, storageClass: tekvirt-hostpath}, cacheStrategy: {type: PVC}}
      attachDefaultNetwork: true
      networkInterfaceMultiqueue: Enable
      hostDevices: [{deviceName: nvidia.com/A100, count: 1}]
`

// TestHyperShift: HostedClusters and NodePools of the KubeVirt platform
// with the fields tekvirt implements (and the CRD's defaults) are
// admitted; another platform, a field tekvirt ignores, or both replicas
// and autoScaling are refused, naming the field.
func TestHyperShift(t *testing.T) {
	v := Validator{}
	ctx := context.Background()
	for _, tc := range []struct {
		name, kind, manifest, want string
	}{
		{"hosted cluster", "HostedCluster", hostedClusterManifest, ""},
		{"node pool", "NodePool", nodePoolManifest, ""},
		{"another platform", "HostedCluster", strings.Replace(hostedClusterManifest, "type: KubeVirt", "type: AWS", 1), `spec.platform.type: "AWS"`},
		{"a field tekvirt ignores", "HostedCluster", strings.Replace(hostedClusterManifest, "    kubevirt:\n", "    kubevirt:\n      baseDomainPassthrough: true\n", 1), "spec.platform.kubevirt.baseDomainPassthrough"},
		{"unmanaged etcd", "HostedCluster", strings.Replace(hostedClusterManifest, "managementType: Managed", "managementType: Unmanaged", 1), "spec.etcd.managementType"},
		{"Calico", "HostedCluster", strings.Replace(hostedClusterManifest, "networkType: OVNKubernetes", "networkType: Calico", 1), "spec.networking.networkType"},
		{"node pool on AWS", "NodePool", strings.Replace(nodePoolManifest, "type: KubeVirt", "type: AWS", 1), "spec.platform.type"},
		{"replicas and autoScaling", "NodePool", strings.Replace(nodePoolManifest, "replicas: 2", "replicas: 2\n  autoScaling: {min: 1, max: 3}", 1), "spec.replicas and spec.autoScaling"},
		{"min above max", "NodePool", strings.Replace(nodePoolManifest, "replicas: 2", "autoScaling: {min: 4, max: 3}", 1), "min 4 is above max 3"},
		{"in-place upgrades", "NodePool", strings.Replace(nodePoolManifest, "upgradeType: Replace", "upgradeType: InPlace", 1), "spec.management.upgradeType"},
	} {
		req := request(t, tc.kind, admissionv1.Create, tc.manifest)
		req.Kind.Group = "hypershift.openshift.io"
		r := v.Handle(ctx, req)
		switch {
		case tc.want == "" && !r.Allowed:
			t.Errorf("%s: denied: %s", tc.name, r.Result.Message)
		case tc.want != "" && (r.Allowed || !strings.Contains(r.Result.Message, tc.want)):
			t.Errorf("%s: allowed %v (%v), want refused naming %q", tc.name, r.Allowed, r.Result, tc.want)
		}
	}
}
