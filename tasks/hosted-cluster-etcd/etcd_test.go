package hostedclusteretcd

import (
	"net"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/contracts/podsecurity"
)

func TestMemberConfig(t *testing.T) {
	members := []net.IP{net.ParseIP("10.96.0.10"), net.ParseIP("10.96.0.11"), net.ParseIP("10.96.0.12")}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(MemberConfig("clusters-demo", 1, members)), &cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"name":                        "etcd-1",
		"advertise-client-urls":       "https://10.96.0.11:2379",
		"initial-advertise-peer-urls": "https://10.96.0.11:2380",
		"initial-cluster":             "etcd-0=https://10.96.0.10:2380,etcd-1=https://10.96.0.11:2380,etcd-2=https://10.96.0.12:2380",
		"initial-cluster-token":       "clusters-demo",
	}
	for k, v := range want {
		if cfg[k] != v {
			t.Errorf("%s = %v, want %v", k, cfg[k], v)
		}
	}
	for _, sec := range []string{"client-transport-security", "peer-transport-security"} {
		m, _ := cfg[sec].(map[string]any)
		if m["client-cert-auth"] != true || m["trusted-ca-file"] == nil {
			t.Errorf("%s: %v; both sides must ask for a certificate from the etcd CA", sec, m)
		}
	}
	// Members dial each other with the address-less peer client
	// certificate, and the peer port accepts only the members' common names
	// (not the API server's etcd client certificate, from the same CA).
	peer, _ := cfg["peer-transport-security"].(map[string]any)
	cns, _ := peer["allowed-cn"].([]any)
	if peer["client-cert-file"] != "/etc/etcd/tls/peer-client.crt" || peer["client-key-file"] != "/etc/etcd/tls/peer-client.key" ||
		len(cns) != 2 || cns[0] != "etcd-peer" || cns[1] != "etcd" {
		t.Errorf("peer-transport-security: %v", peer)
	}
	if client, _ := cfg["client-transport-security"].(map[string]any); client["client-cert-file"] != nil || client["allowed-cn"] != nil {
		t.Errorf("client-transport-security: %v; clients keep their own certificates", client)
	}
}

func TestParamsChecked(t *testing.T) {
	ok := Params{Namespace: "ns", Image: "img", Replicas: 1, StorageSize: "1Gi"}
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Params{
		"replicas":     {Namespace: "ns", Image: "img", Replicas: 2, StorageSize: "1Gi"},
		"storageSize":  {Namespace: "ns", Image: "img", Replicas: 1, StorageSize: "lots"},
		"releaseImage": {Namespace: "ns", Replicas: 1, StorageSize: "1Gi"},
	} {
		if err := p.check(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestStatefulSetKeepsDataOnAClaim(t *testing.T) {
	sts := StatefulSet(Params{Namespace: "ns", Image: "img", Replicas: 3, StorageClassName: "fast", StorageSize: "2Gi"})
	if *sts.Spec.Replicas != 3 || len(sts.Spec.VolumeClaimTemplates) != 1 || *sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != "fast" {
		t.Errorf("statefulset %+v", sts.Spec)
	}
	if got := sts.Spec.Template.Spec.Containers[0].Command[1]; got != "--config-file=/etc/etcd/config/$(POD_NAME).yaml" {
		t.Errorf("command %q", got)
	}
	if StatefulSet(Params{Namespace: "ns", Image: "img", Replicas: 1, StorageSize: "2Gi"}).Spec.VolumeClaimTemplates[0].Spec.StorageClassName != nil {
		t.Error("no class asked, yet one is named (the default class would not apply)")
	}
}

// TestStatefulSetMeetsRestricted: etcd's Pods pass Pod Security
// Admission's own "restricted" checks.
func TestStatefulSetMeetsRestricted(t *testing.T) {
	tmpl := StatefulSet(Params{Namespace: "ns", Image: "img", Replicas: 3, StorageSize: "2Gi"}).Spec.Template
	if v, err := podsecurity.Violations(&tmpl.ObjectMeta, &tmpl.Spec); err != nil || len(v) > 0 {
		t.Errorf("etcd violates restricted: %v %v", v, err)
	}
}
