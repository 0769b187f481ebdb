package config_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/controllers/testenv"
	"github.com/tekvirt/tekvirt/controllers/vmwebhook"
)

// vmManifest is a VirtualMachine as KubeVirt's user guide writes one.
const vmManifest = `
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: testvm
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        kubevirt.io/size: small
    spec:
      domain:
        cpu:
          cores: 1
        devices:
          disks:
            - name: containerdisk
              disk:
                bus: virtio
            - name: cloudinitdisk
              disk:
                bus: virtio
          interfaces:
            - name: default
              masquerade: {}
        resources:
          requests:
            memory: 64M
      networks:
        - name: default
          pod: {}
      volumes:
        - name: containerdisk
          containerDisk:
            image: quay.example/containerdisks/cirros:latest
        - name: cloudinitdisk
          cloudInitNoCloud:
            userDataBase64: SGkuXG4=
`

// TestKubeVirtCRDsAcceptUpstreamManifests loads the generated KubeVirt CRDs
// into a real API server and checks that a manifest written for KubeVirt is
// accepted unchanged under strict field validation, while an unknown field
// is rejected by name.
func TestKubeVirtCRDsAcceptUpstreamManifests(t *testing.T) {
	cfg := testenv.Start(t, "crd/kubevirt.io_virtualmachines.yaml", "crd/kubevirt.io_virtualmachineinstances.yaml")
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	vms := dyn.Resource(schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}).Namespace("default")
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(vmManifest), &obj); err != nil {
		t.Fatal(err)
	}
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	got, err := vms.Create(context.Background(), &unstructured.Unstructured{Object: obj}, strict)
	if err != nil {
		t.Fatalf("upstream VirtualMachine manifest rejected: %v", err)
	}
	if rs, _, _ := unstructured.NestedString(got.Object, "spec", "runStrategy"); rs != "Halted" {
		t.Fatalf("runStrategy = %q after a round trip", rs)
	}
	mem, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "domain", "resources", "requests", "memory")
	if mem != "64M" {
		t.Fatalf("memory request = %q after a round trip (pruned?)", mem)
	}

	bad := &unstructured.Unstructured{Object: obj}
	bad.SetName("typo")
	if err := unstructured.SetNestedField(bad.Object, int64(1), "spec", "template", "spec", "domain", "cpu", "coress"); err != nil {
		t.Fatal(err)
	}
	_, err = vms.Create(context.Background(), bad, strict)
	if err == nil || !strings.Contains(err.Error(), "coress") {
		t.Fatalf("err = %v, want the unknown field spec.template.spec.domain.cpu.coress named", err)
	}
}

// dvManifest is a DataVolume as CDI's documentation writes one.
const dvManifest = `
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: fedora
spec:
  source:
    http:
      url: "https://download.example/fedora.qcow2.xz"
      checksum: "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  storage:
    resources:
      requests:
        storage: 5Gi
  contentType: kubevirt
`

// TestCDICRDsAcceptUpstreamManifests does the same for the CDI CRDs.
func TestCDICRDsAcceptUpstreamManifests(t *testing.T) {
	cfg := testenv.Start(t, "crd/cdi.kubevirt.io_datavolumes.yaml", "crd/cdi.kubevirt.io_datasources.yaml", "crd/cdi.kubevirt.io_dataimportcrons.yaml")
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dvs := dyn.Resource(schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}).Namespace("default")
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(dvManifest), &obj); err != nil {
		t.Fatal(err)
	}
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	got, err := dvs.Create(context.Background(), &unstructured.Unstructured{Object: obj}, strict)
	if err != nil {
		t.Fatalf("upstream DataVolume manifest rejected: %v", err)
	}
	if url, _, _ := unstructured.NestedString(got.Object, "spec", "source", "http", "url"); url == "" {
		t.Fatal("source.http.url pruned")
	}
	bad := &unstructured.Unstructured{Object: obj}
	bad.SetName("typo")
	if err := unstructured.SetNestedField(bad.Object, "x", "spec", "source", "http", "urll"); err != nil {
		t.Fatal(err)
	}
	if _, err := dvs.Create(context.Background(), bad, strict); err == nil || !strings.Contains(err.Error(), "urll") {
		t.Fatalf("err = %v, want the unknown field spec.source.http.urll named", err)
	}
}

// hostedClusterManifest is a HostedCluster for the KubeVirt platform as
// HyperShift's documentation writes a minimal one.
const hostedClusterManifest = `
apiVersion: hypershift.openshift.io/v1beta1
kind: HostedCluster
metadata:
  name: example
spec:
  release:
    image: 127.0.0.1:5000/tekvirt/hosted-release:latest
  pullSecret:
    name: example-pull-secret
  platform:
    type: KubeVirt
  networking:
    clusterNetwork:
      - cidr: 10.132.0.0/14
    serviceNetwork:
      - cidr: 172.31.0.0/16
  services:
    - service: APIServer
      servicePublishingStrategy:
        type: LoadBalancer
    - service: OAuthServer
      servicePublishingStrategy:
        type: Route
    - service: Konnectivity
      servicePublishingStrategy:
        type: Route
    - service: Ignition
      servicePublishingStrategy:
        type: Route
`

const nodePoolManifest = `
apiVersion: hypershift.openshift.io/v1beta1
kind: NodePool
metadata:
  name: example
spec:
  clusterName: example
  replicas: 2
  management:
    upgradeType: Replace
  release:
    image: 127.0.0.1:5000/tekvirt/hosted-release:latest
  platform:
    type: KubeVirt
    kubevirt:
      compute:
        cores: 1
        memory: 1Gi
      rootVolume:
        type: Persistent
        persistent:
          size: 4Gi
`

// TestHyperShiftCRDsAcceptUpstreamManifests: HostedCluster and NodePool
// manifests as HyperShift's documentation writes them are accepted by a
// real API server under strict field validation, its defaults filled in
// (the CRD's CEL rules included), and what it stores passes tekvirt's
// admission allowlists: a CRD default tekvirt does not accept would refuse
// every HostedCluster.
func TestHyperShiftCRDsAcceptUpstreamManifests(t *testing.T) {
	cfg := testenv.Start(t, "crd/hypershift.openshift.io_hostedclusters.yaml", "crd/hypershift.openshift.io_nodepools.yaml")
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	for _, tc := range []struct {
		resource, manifest string
		validate           func(map[string]any) error
	}{
		{"hostedclusters", hostedClusterManifest, vmwebhook.ValidateHostedClusterSpec},
		{"nodepools", nodePoolManifest, vmwebhook.ValidateNodePoolSpec},
	} {
		res := dyn.Resource(schema.GroupVersionResource{Group: "hypershift.openshift.io", Version: "v1beta1", Resource: tc.resource}).Namespace("default")
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(tc.manifest), &obj); err != nil {
			t.Fatal(err)
		}
		got, err := res.Create(context.Background(), &unstructured.Unstructured{Object: obj}, strict)
		if err != nil {
			t.Fatalf("%s: upstream manifest rejected: %v", tc.resource, err)
		}
		spec, _, _ := unstructured.NestedMap(got.Object, "spec")
		if err := tc.validate(spec); err != nil {
			t.Errorf("%s as stored, defaults included, refused by tekvirt's admission: %v", tc.resource, err)
		}
		t.Logf("%s stored spec keys: %d", tc.resource, len(spec))
	}
}
