package main

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
)

// exposeFlags are virtctl expose's.
type exposeFlags struct {
	name, serviceType, protocol string
	port, targetPort            int32
}

// exposedService is the Service that reaches port targetPort of the
// launcher Pods carrying labels (a VMI's, or a VM template's), as virtctl
// expose makes it: the selector is those labels, so it follows the VM
// across restarts, but the node label the runtime puts on a VMI (not on
// its Pod).
func exposedService(ns, kind, name string, vmiLabels map[string]string, f exposeFlags) (*corev1.Service, error) {
	labels := maps.Clone(vmiLabels)
	delete(labels, v1.NodeNameLabel)
	if len(labels) == 0 {
		return nil, fmt.Errorf("%s %s/%s has no labels to select its launcher Pod by: add one (e.g. to spec.template.metadata.labels of a VM)", kind, ns, name)
	}
	if f.name == "" {
		return nil, errors.New("--name of the Service is required")
	}
	if f.port <= 0 || f.port > 65535 {
		return nil, fmt.Errorf("--port %d is not a port", f.port)
	}
	target := f.targetPort
	if target == 0 {
		target = f.port
	}
	typ := corev1.ServiceType(f.serviceType)
	switch typ {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	default:
		return nil, fmt.Errorf("--type %q: want ClusterIP, NodePort or LoadBalancer", f.serviceType)
	}
	proto := corev1.Protocol(strings.ToUpper(f.protocol))
	if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
		return nil, fmt.Errorf("--protocol %q: want TCP or UDP", f.protocol)
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: f.name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: labels, Ports: []corev1.ServicePort{{
			Protocol: proto, Port: f.port, TargetPort: intstr.FromInt32(target)}}},
	}, nil
}

// exposeCmd is `tekvirt expose vmi|vm NAME`, as virtctl expose.
func exposeCmd(g *globalFlags) *cobra.Command {
	var ns string
	f := exposeFlags{serviceType: "ClusterIP", protocol: "TCP"}
	cmd := &cobra.Command{
		Use:   "expose (vmi|vm) NAME --name SERVICE --port PORT",
		Short: "Make a Service that reaches a port of a VMI's or VM's guest through its launcher Pod",
		Example: `  tekvirt expose vmi demo --name demo-ssh --port 2222 --target-port 22
  tekvirt expose vm demo --name demo-web --port 80 --type NodePort`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.vmClient()
			if err != nil {
				return err
			}
			ctx, kind, name := cmd.Context(), args[0], args[1]
			var labels map[string]string
			switch kind {
			case "vmi", "virtualmachineinstance":
				vmi := &v1.VirtualMachineInstance{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
					return err
				}
				kind, labels = "VirtualMachineInstance", vmi.Labels
			case "vm", "virtualmachine":
				vm := &v1.VirtualMachine{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
					return err
				}
				kind = "VirtualMachine"
				if vm.Spec.Template != nil {
					labels = vm.Spec.Template.ObjectMeta.Labels
				}
			default:
				return fmt.Errorf("cannot expose %q: want vmi or vm", kind)
			}
			svc, err := exposedService(ns, kind, name, labels, f)
			if err != nil {
				return err
			}
			if err := c.Create(ctx, svc); err != nil {
				return fmt.Errorf("creating Service %s/%s: %w", ns, f.name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Service %s/%s created\n", ns, f.name)
			return nil
		},
	}
	fl := cmd.Flags()
	namespaceFlag(fl, &ns, "namespace of the VMI or VM")
	fl.StringVar(&f.name, "name", "", "name of the Service")
	fl.Int32Var(&f.port, "port", 0, "port the Service serves")
	fl.Int32Var(&f.targetPort, "target-port", 0, "guest port (default --port)")
	fl.StringVar(&f.serviceType, "type", f.serviceType, "ClusterIP, NodePort or LoadBalancer")
	fl.StringVar(&f.protocol, "protocol", f.protocol, "TCP or UDP")
	return cmd
}
