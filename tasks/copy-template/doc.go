// Package copytemplate is the step of the copy-template task: it copies an
// OpenShift Template, a common template's copy becoming the user's own.
package copytemplate
