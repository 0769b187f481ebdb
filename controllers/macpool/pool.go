package macpool

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
)

// reservationTTL is how long a MAC given out at admission stays taken
// without a VirtualMachine holding it: longer than the cache takes to
// see a new VirtualMachine, so two creates close together never share one.
const reservationTTL = time.Minute

// Pool gives out MACs. One per process: it serializes its admissions.
type Pool struct {
	// Reader reads the NetworkAddonsConfig and every VirtualMachine
	// (the manager's cache).
	Reader client.Reader
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu       sync.Mutex
	reserved map[uint64]reservation
}

type reservation struct {
	vm string // namespace/name
	at time.Time
}

// +kubebuilder:rbac:groups=networkaddonsoperator.network.kubevirt.io,resources=networkaddonsconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch

// Assign gives each interface of spec (the template of vm, as admitted)
// that has no MAC one from the pool, and refuses a MAC another
// VirtualMachine has, but those vm already has (own: an update's stored
// object's). It does nothing unless the NetworkAddonsConfig "cluster"
// turns kubeMacPool on.
func (p *Pool) Assign(ctx context.Context, vm *v1.VirtualMachine, spec *v1.VirtualMachineInstanceSpec, own ...string) error {
	nac := &nacv1.NetworkAddonsConfig{}
	if err := p.Reader.Get(ctx, client.ObjectKey{Name: nacv1.Name}, nac); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading the MAC pool's NetworkAddonsConfig: %w", err)
	}
	mp := nac.Spec.KubeMacPool
	if mp == nil || mp.RangeStart == "" || mp.RangeEnd == "" {
		return nil
	}
	r, err := ParseRange(mp.RangeStart, mp.RangeEnd)
	if err != nil {
		return fmt.Errorf("NetworkAddonsConfig %s: %w", nacv1.Name, err)
	}
	self := vm.Namespace + "/" + vm.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	taken, err := p.taken(ctx, vm.Namespace, self)
	if err != nil {
		return err
	}
	for _, mac := range own {
		if m, err := parseMAC(mac); err == nil {
			delete(taken, m)
		}
	}
	given, err := assign(r, spec.Domain.Devices.Interfaces, taken)
	if err != nil {
		return err
	}
	if p.reserved == nil {
		p.reserved = map[uint64]reservation{}
	}
	for _, m := range given {
		p.reserved[m] = reservation{vm: self, at: p.now()}
	}
	return nil
}

// taken are the MACs of every VirtualMachine but self, and those given out
// lately to another; an owner in namespace ns is named, others are not
// (a tenant learns no other namespace's names).
func (p *Pool) taken(ctx context.Context, ns, self string) (map[uint64]string, error) {
	vms := &v1.VirtualMachineList{}
	if err := p.Reader.List(ctx, vms); err != nil {
		return nil, fmt.Errorf("listing VirtualMachines for the MAC pool: %w", err)
	}
	taken := map[uint64]string{}
	for _, vm := range vms.Items {
		key := vm.Namespace + "/" + vm.Name
		if key == self || vm.Spec.Template == nil {
			continue
		}
		owner := ""
		if vm.Namespace == ns {
			owner = "VirtualMachine " + key
		}
		for _, iface := range vm.Spec.Template.Spec.Domain.Devices.Interfaces {
			if m, err := parseMAC(iface.MacAddress); err == nil {
				taken[m] = owner
			}
		}
	}
	for m, res := range p.reserved {
		switch {
		case p.now().Sub(res.at) > reservationTTL:
			delete(p.reserved, m)
		case res.vm != self:
			// The cache may not hold that VirtualMachine yet: its
			// reservation names it as the VirtualMachine would.
			if _, ok := taken[m]; !ok {
				taken[m] = ""
				if resNS, name, _ := strings.Cut(res.vm, "/"); resNS == ns && name != "" {
					taken[m] = "VirtualMachine " + res.vm
				}
			}
		}
	}
	return taken, nil
}

func (p *Pool) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}
