// Package pipelines is to hold tekvirt's Tekton pipelines, one folder each
// with pipeline.yaml, README.md and samples/, every taskRef naming a task of
// tasks/. The first pipeline (vm-test) comes with the VM runtime.
package pipelines
