// Package arrayargs reads several Tekton array params from one step's
// arguments. Tekton expands $(params.x[*]) into separate arguments and
// cannot put an array into an environment variable, so a task writes each
// array after a marker argument (--name) and the step splits them here.
package arrayargs
