package macpool

import (
	"errors"
	"fmt"

	v1 "kubevirt.io/api/core/v1"
)

// ErrExhausted means every MAC of the range is in use.
var ErrExhausted = errors.New("every MAC of the pool's range is in use")

// assign fills the MAC of each interface in ifaces that has none with the
// first of r that is not in taken, and refuses an interface's MAC that is
// in taken (the owner's description is for a message; "" names no one).
// It returns the MACs it gave out.
func assign(r Range, ifaces []v1.Interface, taken map[uint64]string) ([]uint64, error) {
	for i, iface := range ifaces {
		if iface.MacAddress == "" {
			continue
		}
		m, err := parseMAC(iface.MacAddress)
		if err != nil {
			return nil, fmt.Errorf("spec.template.spec.domain.devices.interfaces[%d].macAddress: %w", i, err)
		}
		if owner, ok := taken[m]; ok {
			if owner == "" {
				owner = "another VirtualMachine"
			}
			return nil, fmt.Errorf("spec.template.spec.domain.devices.interfaces[%d].macAddress %s is already used by %s", i, iface.MacAddress, owner)
		}
		taken[m] = "this VirtualMachine"
	}
	var given []uint64
	next := r.Start
	for i := range ifaces {
		if ifaces[i].MacAddress != "" {
			continue
		}
		for next <= r.End {
			if _, ok := taken[next]; !ok {
				break
			}
			next++
		}
		if next > r.End {
			return nil, fmt.Errorf("spec.template.spec.domain.devices.interfaces[%d] (%s): %w (%s-%s)", i, ifaces[i].Name, ErrExhausted, formatMAC(r.Start), formatMAC(r.End))
		}
		ifaces[i].MacAddress = formatMAC(next)
		taken[next] = "this VirtualMachine"
		given = append(given, next)
		next++
	}
	return given, nil
}
