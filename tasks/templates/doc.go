// Package templates is what the template tasks share: OpenShift
// template.openshift.io/v1 Templates processed with OpenShift's rules
// (parameter values, generated values, required parameters, ${NAME} and
// ${{NAME}} substitution, the template's labels on every object).
package templates
