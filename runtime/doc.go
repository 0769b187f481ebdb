// Package runtime is the node side of tekvirt: a handler per node that
// watches the VMIs placed on it and one launcher per VM owning a libvirt
// domain. So far it holds domain/, the VMI -> libvirt XML conversion; the
// handler and launcher come next. The layering test keeps Tekton out of it.
package runtime
