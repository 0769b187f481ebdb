package vmfromtemplate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	templatev1 "github.com/openshift/api/template/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/templates"
	"github.com/tekvirt/tekvirt/tasks/vmcreate"
)

// Params are the task's params; Options.Namespace is vmNamespace.
type Params struct {
	TemplateName      string
	TemplateNamespace string
	// TemplateParams are the KEY:VALUE entries of templateParams.
	TemplateParams []string
	vmcreate.Options
}

// Result is what the step did, and how long processing the template took.
type Result struct {
	vmcreate.Result
	Processing time.Duration
}

// Run reads the template, processes it into its VirtualMachine and creates
// that VM in vmNamespace (else the TaskRun's), or finds the one an earlier
// run with the same params created.
func Run(ctx context.Context, c client.Client, start vmcreate.Starter, p Params) (Result, error) {
	if p.TemplateName == "" {
		return Result{}, errors.New("param templateName is empty: name the template to create the VM from")
	}
	ns := p.TemplateNamespace
	if ns == "" {
		ns = p.DefaultNamespace
	}
	supplied, err := templates.ParseParams(p.TemplateParams)
	if err != nil {
		return Result{}, err
	}
	tmpl := &templatev1.Template{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.TemplateName}, tmpl); err != nil {
		return Result{}, fmt.Errorf("reading template %s/%s: %w", ns, p.TemplateName, err)
	}
	began := time.Now()
	vm, err := templates.VirtualMachine(tmpl, supplied)
	if err != nil {
		return Result{}, err
	}
	templates.MarkOrigin(vm, tmpl)
	processing := time.Since(began)
	// As kubevirt-tekton-tasks: the VM goes to vmNamespace or the
	// TaskRun's, whatever namespace the template wrote.
	vm.Namespace = ""
	if err := p.Apply(vm); err != nil {
		return Result{}, err
	}
	id := vmcreate.Identity(ns, p.TemplateName, strings.Join(p.TemplateParams, "\x01"), p.Namespace, p.RunStrategy, p.StartVM)
	res, err := vmcreate.Create(ctx, c, start, p.Options, vm, id)
	return Result{Result: res, Processing: processing}, err
}
