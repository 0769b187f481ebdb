// Package tekvirt runs virtual machines on Kubernetes as Tekton pipelines.
// The root package only holds repository-wide tests (layering, package
// docs); the code lives in images/, tasks/, pipelines/, controllers/,
// runtime/, catalog/, e2e/ and cmd/.
package tekvirt
