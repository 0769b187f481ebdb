// Package deviceplugin is a kubelet device plugin for a character device
// every Pod may share, such as /dev/net/tun: it advertises a number of
// interchangeable devices of one extended resource and gives each
// container that requests one the device node. It registers with the
// kubelet, and again whenever the kubelet restarts (which removes the
// plugins' sockets).
package deviceplugin
