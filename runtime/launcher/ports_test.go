package launcher

import (
	"reflect"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

func TestForwardedPorts(t *testing.T) {
	withPorts := func(ports ...v1.Port) *v1.VirtualMachineInstance {
		vmi := &v1.VirtualMachineInstance{}
		vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", Ports: ports}}
		return vmi
	}
	ssh := GuestPort{"tcp", 22}
	for name, tt := range map[string]struct {
		vmi  *v1.VirtualMachineInstance
		want []GuestPort
	}{
		"no interfaces: SSH":       {&v1.VirtualMachineInstance{}, []GuestPort{ssh}},
		"no VMI: SSH":              {nil, []GuestPort{ssh}},
		"declared, TCP by default": {withPorts(v1.Port{Port: 80}, v1.Port{Protocol: "UDP", Port: 53}), []GuestPort{ssh, {"tcp", 80}, {"udp", 53}}},
		"22 and repeats once":      {withPorts(v1.Port{Port: 22}, v1.Port{Protocol: "TCP", Port: 80}, v1.Port{Port: 80}), []GuestPort{ssh, {"tcp", 80}}},
		"unknown protocol skipped": {withPorts(v1.Port{Protocol: "SCTP", Port: 9}), []GuestPort{ssh}},
	} {
		if got := forwardedPorts(tt.vmi); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %v, want %v", name, got, tt.want)
		}
	}
}
