package handler

import (
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/agent"
	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// observation is what the handler saw of one VMI on the node.
type observation struct {
	state LauncherState
	// status is the launcher's report while it runs (nil if it did not answer yet).
	status *launcher.Status
	// exit is the launcher's record once the domain ended.
	exit *launcher.Exited
	// prepareErr is why the volumes could not be prepared.
	prepareErr error
}

// Reasons set on VMI conditions.
const (
	reasonLauncherLost   = "LauncherLost"
	reasonVolumesPending = "VolumesNotReady"
	reasonStopped        = "Stopped"
	reasonFailed         = "DomainFailed"
	reasonGuestNotReady  = "GuestNotRunning"
)

// nextStatus computes the VMI status from what the node saw. It is pure:
// the reconciler patches the result.
func nextStatus(vmi *v1.VirtualMachineInstance, obs observation, now metav1.Time) v1.VirtualMachineInstanceStatus {
	st := *vmi.Status.DeepCopy()
	var perm *permanentError
	switch {
	case errors.As(obs.prepareErr, &perm):
		setPhase(&st, v1.Failed, now)
		setCond(&st, v1.VirtualMachineInstanceReady, corev1.ConditionFalse, perm.reason, perm.Error(), now)
	case obs.prepareErr != nil:
		setCond(&st, v1.VirtualMachineInstanceSynchronized, corev1.ConditionFalse, reasonVolumesPending, obs.prepareErr.Error(), now)
	case obs.state == Running && obs.status != nil:
		running(&st, vmi, obs.status, now)
	case obs.state == Exited:
		ended(&st, obs.exit, now)
	case obs.state == Lost:
		setPhase(&st, v1.Failed, now)
		setCond(&st, v1.VirtualMachineInstanceReady, corev1.ConditionFalse, reasonLauncherLost,
			"the VM's launcher process exited without recording how the VM ended; its domain was destroyed", now)
		dropCond(&st, v1.VirtualMachineInstanceAgentConnected)
	}
	return st
}

func running(st *v1.VirtualMachineInstanceStatus, vmi *v1.VirtualMachineInstance, ls *launcher.Status, now metav1.Time) {
	dropCond(st, v1.VirtualMachineInstanceSynchronized)
	accessCredentials(st, ls.AccessCredentials, now)
	switch ls.Domain {
	case "running", "paused":
		setPhase(st, v1.Running, now)
		setLiveMigratable(st, vmi, now)
	default:
		setCond(st, v1.VirtualMachineInstanceReady, corev1.ConditionFalse, reasonGuestNotReady, "domain is "+ls.Domain, now)
		return
	}
	if ls.Domain == "paused" {
		setCond(st, v1.VirtualMachineInstancePaused, corev1.ConditionTrue, "PausedByUser", "VMI was paused", now)
		setCond(st, v1.VirtualMachineInstanceReady, corev1.ConditionFalse, "Paused", "VMI is paused", now)
	} else {
		dropCond(st, v1.VirtualMachineInstancePaused)
		setCond(st, v1.VirtualMachineInstanceReady, corev1.ConditionTrue, "", "", now)
	}
	if !ls.AgentConnected {
		dropCond(st, v1.VirtualMachineInstanceAgentConnected)
		if len(ls.PodIPs) > 0 {
			st.Interfaces = interfaces(vmi, ls)
		}
		return
	}
	setCond(st, v1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue, "", "", now)
	if o := ls.OSInfo; o != nil {
		st.GuestOSInfo = v1.VirtualMachineInstanceGuestOSInfo{
			Name: o.Name, KernelRelease: o.KernelRelease, Version: o.Version, PrettyName: o.PrettyName,
			VersionID: o.VersionID, KernelVersion: o.KernelVersion, Machine: o.Machine, ID: o.ID,
		}
	}
	st.Interfaces = interfaces(vmi, ls)
}

// accessCredentials mirrors how the VMI's accessCredentials last reached
// the guest, with KubeVirt's event reasons as the condition's.
func accessCredentials(st *v1.VirtualMachineInstanceStatus, cs *launcher.CredentialsStatus, now metav1.Time) {
	switch {
	case cs == nil:
		dropCond(st, v1.VirtualMachineInstanceAccessCredentialsSynchronized)
	case cs.Synchronized:
		setCond(st, v1.VirtualMachineInstanceAccessCredentialsSynchronized, corev1.ConditionTrue, string(v1.AccessCredentialsSyncSuccess), cs.Message, now)
	default:
		setCond(st, v1.VirtualMachineInstanceAccessCredentialsSynchronized, corev1.ConditionFalse, string(v1.AccessCredentialsSyncFailed), cs.Message, now)
	}
}

// Where an interface's status comes from, in KubeVirt's words.
const (
	infoDomain      = "domain"
	infoGuestAgent  = "guest-agent"
	infoDomainAgent = "domain, guest-agent"
)

// interfaces reports the VMI's interfaces as KubeVirt does: each of its
// spec in order, with its MAC, the Pod interface it is bound to and what
// the guest agent says of the guest's interface with that MAC (its name
// and addresses); the interface on the pod network at the Pod's addresses
// (masquerade: the guest's own is private to the Pod). Guest interfaces
// with no MAC of the spec follow, from the agent alone.
func interfaces(vmi *v1.VirtualMachineInstance, ls *launcher.Status) []v1.VirtualMachineInstanceNetworkInterface {
	nics, _ := domain.NICs(vmi) // a VMI the runtime refused never ran
	guest := map[string]agent.Interface{}
	for _, gi := range ls.Interfaces {
		if gi.Name != "lo" && gi.MAC != "" {
			guest[strings.ToLower(gi.MAC)] = gi
		}
	}
	var out []v1.VirtualMachineInstanceNetworkInterface
	for _, nic := range nics {
		ni := v1.VirtualMachineInstanceNetworkInterface{Name: nic.Name, MAC: ls.MACs[nic.Name], PodInterfaceName: nic.PodInterface, InfoSource: infoDomain}
		if gi, ok := guest[strings.ToLower(ni.MAC)]; ok && ni.MAC != "" {
			ni.InterfaceName, ni.IPs, ni.InfoSource = gi.Name, guestIPs(gi), infoDomainAgent
			delete(guest, strings.ToLower(ni.MAC))
		}
		if !nic.Secondary() && len(ls.PodIPs) > 0 {
			ni.IPs = ls.PodIPs
		}
		if ni.MAC == "" && ni.InfoSource == infoDomain && len(ls.PodIPs) == 0 {
			continue // nothing known of it: no launcher Pod
		}
		out = append(out, withIP(ni))
	}
	for _, gi := range ls.Interfaces {
		if _, ok := guest[strings.ToLower(gi.MAC)]; ok && gi.MAC != "" {
			out = append(out, withIP(v1.VirtualMachineInstanceNetworkInterface{InterfaceName: gi.Name, MAC: gi.MAC, IPs: guestIPs(gi), InfoSource: infoGuestAgent}))
		}
	}
	return out
}

// withIP is ni with its first address as its IP.
func withIP(ni v1.VirtualMachineInstanceNetworkInterface) v1.VirtualMachineInstanceNetworkInterface {
	if len(ni.IPs) > 0 {
		ni.IP = ni.IPs[0]
	}
	return ni
}

// guestIPs are the addresses the agent reports of gi.
func guestIPs(gi agent.Interface) []string {
	var out []string
	for _, ip := range gi.IPs {
		out = append(out, ip.Address)
	}
	return out
}

func ended(st *v1.VirtualMachineInstanceStatus, exit *launcher.Exited, now metav1.Time) {
	phase, reason := v1.Failed, reasonFailed
	if exit != nil && exit.Succeeded {
		phase, reason = v1.Succeeded, reasonStopped
	}
	msg := "the VM's domain ended"
	if exit != nil {
		msg = "the VM's domain ended: " + exit.Reason
	}
	setPhase(st, phase, now)
	setCond(st, v1.VirtualMachineInstanceReady, corev1.ConditionFalse, reason, msg, now)
	dropCond(st, v1.VirtualMachineInstanceAgentConnected)
	dropCond(st, v1.VirtualMachineInstancePaused)
}

func setPhase(st *v1.VirtualMachineInstanceStatus, p v1.VirtualMachineInstancePhase, now metav1.Time) {
	if st.Phase == p {
		return
	}
	st.Phase = p
	st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps, v1.VirtualMachineInstancePhaseTransitionTimestamp{
		Phase: p, PhaseTransitionTimestamp: now,
	})
}

func setCond(st *v1.VirtualMachineInstanceStatus, t v1.VirtualMachineInstanceConditionType, s corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	c := v1.VirtualMachineInstanceCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: now, LastProbeTime: now}
	for i, old := range st.Conditions {
		if old.Type == t {
			if old.Status == s {
				c.LastTransitionTime = old.LastTransitionTime
				if old.Reason == reason && old.Message == msg {
					c.LastProbeTime = old.LastProbeTime
				}
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

func dropCond(st *v1.VirtualMachineInstanceStatus, t v1.VirtualMachineInstanceConditionType) {
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}

// finished reports whether a VMI has reached a final phase.
func finished(vmi *v1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == v1.Succeeded || vmi.Status.Phase == v1.Failed
}

func findCond(st v1.VirtualMachineInstanceStatus, t v1.VirtualMachineInstanceConditionType) *v1.VirtualMachineInstanceCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}
