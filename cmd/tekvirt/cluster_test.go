package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/controllers/vmwebhook"
)

func goodClusterOptions(t *testing.T) clusterOptions {
	t.Helper()
	ps := filepath.Join(t.TempDir(), "pull-secret.json")
	if err := os.WriteFile(ps, []byte(`{"auths":{"registry.test":{"auth":"dTpw"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return clusterOptions{name: "demo", namespace: "clusters", releaseImage: "127.0.0.1:5000/tekvirt/hosted-release:latest", nodePoolReplicas: 2,
		pullSecretFile: ps, memory: "1Gi", cores: 1, rootVolumeSize: 4, rootVolumeCache: "PVC", availabilityPolicy: "SingleReplica",
		storageMappings: []string{"tekvirt-hostpath/standard,group=fast"}, snapshotMappings: []string{"snap/guest-snap"},
		etcdStorageClass: "tekvirt-hostpath", hostDevices: []string{"nvidia.com/A100", "example.com/fpga,count:2"},
		annotations: []string{"hypershift.openshift.io/pod-security-admission-label-override=Restricted"}, render: true}
}

// TestCreateClusterRender: --render prints the pull secret, HostedCluster
// and NodePool the flags say, and those pass tekvirt's own admission.
func TestCreateClusterRender(t *testing.T) {
	var out bytes.Buffer
	if err := (&globalFlags{}).createCluster(t.Context(), goodClusterOptions(t), &out); err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(out.String(), "---\n")[1:]
	if len(docs) != 4 {
		t.Fatalf("%d objects rendered, want namespace, secret, cluster, pool:\n%s", len(docs), out.String())
	}
	var hc, np map[string]any
	if err := yaml.Unmarshal([]byte(docs[2]), &hc); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(docs[3]), &np); err != nil {
		t.Fatal(err)
	}
	if err := vmwebhook.ValidateHostedClusterSpec(hc["spec"].(map[string]any)); err != nil {
		t.Errorf("the rendered HostedCluster is refused by tekvirt's admission: %v", err)
	}
	if err := vmwebhook.ValidateNodePoolSpec(np["spec"].(map[string]any)); err != nil {
		t.Errorf("the rendered NodePool is refused by tekvirt's admission: %v", err)
	}
	if _, ok := hc["status"]; ok {
		t.Error("the rendered HostedCluster has a status")
	}
	flat, _ := json.Marshal([]any{hc, np})
	for _, want := range []string{
		`"controllerAvailabilityPolicy":"SingleReplica"`, `"storageClassName":"tekvirt-hostpath"`,
		`{"group":"fast","guestStorageClassName":"standard","infraStorageClassName":"tekvirt-hostpath"}`,
		`"guestVolumeSnapshotClassName":"guest-snap"`, `"cacheStrategy":{"type":"PVC"}`, `"size":"4Gi"`,
		`{"count":1,"deviceName":"nvidia.com/A100"}`, `{"count":2,"deviceName":"example.com/fpga"}`,
		`"compute":{"cores":1,"memory":"1Gi"}`, `"replicas":2`,
		`"annotations":{"hypershift.openshift.io/pod-security-admission-label-override":"Restricted"}`,
	} {
		if !strings.Contains(string(flat), want) {
			t.Errorf("rendered objects lack %s:\n%s", want, flat)
		}
	}
}

// TestCreateClusterBadFlags: each bad value fails before anything is
// made, naming its flag.
func TestCreateClusterBadFlags(t *testing.T) {
	for _, tc := range []struct {
		flag   string
		change func(*clusterOptions)
	}{
		{"infra-storage-class-mapping", func(o *clusterOptions) { o.storageMappings = []string{"no-slash"} }},
		{"infra-storage-class-mapping", func(o *clusterOptions) { o.storageMappings = []string{"a/b,grp=x"} }},
		{"infra-volumesnapshot-class-mapping", func(o *clusterOptions) { o.snapshotMappings = []string{"/b"} }},
		{"host-device-name", func(o *clusterOptions) { o.hostDevices = []string{"gpu,count:x"} }},
		{"host-device-name", func(o *clusterOptions) { o.hostDevices = []string{"gpu,count:0"} }},
		{"pull-secret", func(o *clusterOptions) { o.pullSecretFile = "/nonexistent/pull-secret.json" }},
		{"pull-secret", func(o *clusterOptions) { o.pullSecretFile = "" }},
		{"pull-secret", func(o *clusterOptions) {
			_ = os.WriteFile(o.pullSecretFile, []byte(`{"registry.test":{}}`), 0o600)
		}},
		{"memory", func(o *clusterOptions) { o.memory = "lots" }},
		{"root-volume-cache-strategy", func(o *clusterOptions) { o.rootVolumeCache = "Snapshot" }},
		{"name", func(o *clusterOptions) { o.name = "Demo_1" }},
		// Not given, and no install to read it from.
		{"release-image", func(o *clusterOptions) { o.releaseImage = ""; t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig") }},
		{"control-plane-availability-policy", func(o *clusterOptions) { o.availabilityPolicy = "Triple" }},
		{"annotations", func(o *clusterOptions) { o.annotations = []string{"no-value"} }},
		{"annotations", func(o *clusterOptions) { o.annotations = []string{"bad key=x"} }},
	} {
		o := goodClusterOptions(t)
		tc.change(&o)
		var out bytes.Buffer
		err := (&globalFlags{}).createCluster(t.Context(), o, &out)
		if err == nil || !strings.HasPrefix(err.Error(), "--"+tc.flag+":") {
			t.Errorf("--%s: %v, want an error naming the flag", tc.flag, err)
		}
		if out.Len() != 0 {
			t.Errorf("--%s: output despite the error: %s", tc.flag, out.String())
		}
	}
}
