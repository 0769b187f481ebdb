package main

import (
	"strings"
	"testing"
)

func TestExposedService(t *testing.T) {
	labels := map[string]string{"app": "web", "kubevirt.io/nodeName": "node-a"}
	ok := exposeFlags{name: "web-ssh", port: 2222, targetPort: 22, serviceType: "ClusterIP", protocol: "tcp"}
	svc, err := exposedService("ns", "VirtualMachineInstance", "web", labels, ok)
	if err != nil {
		t.Fatal(err)
	}
	p := svc.Spec.Ports[0]
	if svc.Name != "web-ssh" || len(svc.Spec.Selector) != 1 || svc.Spec.Selector["app"] != "web" || p.Port != 2222 || p.TargetPort.IntValue() != 22 || p.Protocol != "TCP" {
		t.Errorf("service = %+v", svc)
	}
	noTarget := ok
	noTarget.targetPort = 0
	if svc, _ := exposedService("ns", "VirtualMachine", "web", labels, noTarget); svc.Spec.Ports[0].TargetPort.IntValue() != 2222 {
		t.Errorf("target port defaults to %v, want --port", svc.Spec.Ports[0].TargetPort)
	}
	for what, tt := range map[string]struct {
		labels map[string]string
		f      exposeFlags
		want   string
	}{
		"no labels":    {nil, ok, "VirtualMachineInstance ns/web has no labels"},
		"no name":      {labels, exposeFlags{port: 22, serviceType: "ClusterIP", protocol: "TCP"}, "--name"},
		"bad port":     {labels, exposeFlags{name: "s", port: 70000, serviceType: "ClusterIP", protocol: "TCP"}, "--port 70000"},
		"bad type":     {labels, exposeFlags{name: "s", port: 22, serviceType: "ExternalName", protocol: "TCP"}, "--type"},
		"bad protocol": {labels, exposeFlags{name: "s", port: 22, serviceType: "ClusterIP", protocol: "SCTP"}, "--protocol"},
	} {
		if _, err := exposedService("ns", "VirtualMachineInstance", "web", tt.labels, tt.f); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", what, err, tt.want)
		}
	}
}
